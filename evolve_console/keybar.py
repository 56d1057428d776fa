"""The key bar at the bottom: the keys that do something in the view shown, on one line."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget

Key = tuple[str, str, str, bool, str]  # (key, the key as shown, description, enabled, tooltip)


class KeyBar(Widget, can_focus=False):
    """The active key bindings on one line; click a key to press it, hover it for its tooltip.

    Textual's Footer recomposes a widget per key whenever the bindings change (every focus
    change, so every tab switch): hundreds of widgets styled and laid out again. This renders
    the same keys as one line of text and repaints only when the keys shown actually change.
    """

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
        & > .keybar--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        & > .keybar--description { color: $footer-description-foreground; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.keys: list[Key] = []  # the keys shown, in order
        self._spans: list[tuple[int, int, int]] = []  # (start x, end x, index into keys)

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self._bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        # In Textual's order (the focused view's keys first, then the screen's and the app's), but
        # quit always first and the palette last, where the operator looks for them.
        keys: list[Key] = []
        first: list[Key] = []
        palette = None
        for _, binding, enabled, tooltip in screen.active_bindings.values():
            entry = (
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                enabled,
                tooltip or binding.tooltip or binding.description,
            )
            if binding.key == self.app.COMMAND_PALETTE_BINDING:
                palette = entry
            elif binding.show:
                (first if binding.action in ("quit", "app.quit") else keys).append(entry)
        keys = first + keys
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            keys.append(palette)
        if keys != self.keys:
            self.keys = keys
            self.refresh()

    def render(self) -> Text:
        key_style = self.get_component_rich_style("keybar--key")
        description_style = self.get_component_rich_style("keybar--description")
        text = Text(no_wrap=True, overflow="ellipsis")
        self._spans = []
        for index, (_, shown, description, enabled, _) in enumerate(self.keys):
            start = text.cell_len
            dim = Style(dim=not enabled)  # a key that does nothing here is shown dimmed
            text.append(f" {shown}", style=key_style + dim)
            text.append(f" {description}", style=description_style + dim)
            self._spans.append((start, text.cell_len, index))
            text.append(" ")
        return text

    def _key_at(self, x: int) -> Key | None:
        for start, end, index in self._spans:
            if start <= x < end:
                return self.keys[index]
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        found = self._key_at(event.x)
        self.tooltip = found[4] if found else None

    def on_click(self, event: events.Click) -> None:
        found = self._key_at(event.x)
        if found is None:
            return
        if found[3]:
            self.app.simulate_key(found[0])
        else:
            self.app.bell()
