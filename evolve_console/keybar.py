"""The key bar at the bottom: the keys that do something in the view shown, on as many lines as the
width needs (every key stays in sight)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen

from .wrapbar import WrapBar

Key = tuple[str, str, str, bool, str]  # (key, the key as shown, description, enabled, tooltip)


class KeyBar(WrapBar):
    """The active key bindings, wrapped onto a second line when they do not fit on one; click a key
    to press it, hover it for its tooltip.

    Textual's Footer recomposes a widget per key whenever the bindings change (every focus
    change, so every tab switch): hundreds of widgets styled and laid out again. This renders
    the same keys as text and repaints only when the keys shown actually change.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: auto;
        background: $footer-background;
        color: $footer-foreground;
        & > .keybar--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        & > .keybar--description { color: $footer-description-foreground; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.keys: list[Key] = []  # the keys shown, in order

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
            self.changed()

    def items(self) -> list[Text]:
        key_style = self.get_component_rich_style("keybar--key")
        description_style = self.get_component_rich_style("keybar--description")
        items = []
        for _, shown, description, enabled, _ in self.keys:
            dim = Style(dim=not enabled)  # a key that does nothing here is shown dimmed
            item = Text()
            item.append(f" {shown}", style=key_style + dim)
            item.append(f" {description}", style=description_style + dim)
            item.append(" ")
            items.append(item)
        return items

    def on_mouse_move(self, event: events.MouseMove) -> None:
        found = self.item_at(event.x, event.y)
        self.tooltip = self.keys[found][4] if found is not None else None

    def clicked(self, index: int) -> None:
        key, _, _, enabled, _ = self.keys[index]
        if enabled:
            self.app.simulate_key(key)
        else:
            self.app.bell()
