"""Small reusable pieces: a bounded text pane, and the modal screens (confirm, see more, run a stage)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from .format import MORE_LIMIT, clean, preview

# The input each stage starts with in the "run a stage by hand" dialog.
STAGE_TEMPLATES: dict[str, dict[str, Any]] = {
    "mutate_request": {"session": {"id": "manual"}, "system": ["You are opencode."]},
    "observe_message": {
        "session": {"id": "manual", "agent": "build"},
        "thinking": "",
        "calls": [],
        "answer": "hello",
    },
    "idle": {"session": {"id": "manual", "agent": "build"}, "answer": "done"},
    "heartbeat": {"sessions": []},
    "compacting": {"session": {"id": "manual"}},
    "format_notification": {"notifications": ["something happened"]},
    "recover": {"error": "exit 1", "failed_hook": "mutate_request"},
    "tool_before": {"session": {"id": "manual"}, "tool": "read", "callID": "manual", "args": {}},
    "tool_after": {
        "session": {"id": "manual"},
        "tool": "read",
        "callID": "manual",
        "title": "",
        "output": "",
    },
}

STAGES = tuple(STAGE_TEMPLATES)  # the stages an operator can run by hand, in menu order


class Line(Widget):
    """One line of text that changes often (counts, connection state). Unlike Static.update, a
    change repaints only this line: no layout pass over the whole screen."""

    DEFAULT_CSS = """
    Line { height: 1; width: 1fr; }
    """

    text: reactive[Text] = reactive(Text(), layout=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)

    def show(self, text: Text | str) -> None:
        new = text if isinstance(text, Text) else Text(text)
        if new.plain != self.text.plain or new.spans != self.text.spans:
            self.text = new

    def render(self) -> Text:
        out = self.text.copy()
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out


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
        # (key, shown key, description, enabled, tooltip) of each key, in order
        self.keys: list[tuple[str, str, str, bool, str]] = []
        self._spans: list[tuple[int, int, int]] = []  # (start x, end x, index into keys)

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self._bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[Any]) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        keys = []
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
                keys.append(entry)
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

    def _key_at(self, x: int) -> tuple[str, str, str, bool, str] | None:
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


class ViewBar(Widget, can_focus=False):
    """The views as one line of labels ("1 Hook runs  2 Stage results  …"), the shown one marked.
    A click on a label posts `ViewBar.Selected` with its view.

    One line of text rather than Textual's tabs: switching views then restyles nothing but this
    line, and the screen has four fewer levels of containers to lay out and draw.
    """

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"viewbar--view", "viewbar--shown"}
    DEFAULT_CSS = """
    ViewBar {
        height: 1;
        background: $panel;
        & > .viewbar--view { color: $text-muted; }
        & > .viewbar--shown { color: $text; background: $primary 40%; text-style: bold; }
    }
    """

    shown: reactive[str] = reactive("", layout=False)

    class Selected(Message):
        """A view's label was clicked."""

        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(self, views: list[tuple[str, str, str]], *, shown: str, id: str | None = None) -> None:
        """`views`: (view id, key, label) of each view."""
        super().__init__(id=id)
        self.views = views
        self.set_reactive(ViewBar.shown, shown)
        self._spans: list[tuple[int, int, str]] = []  # (start x, end x, view)

    def render(self) -> Text:
        normal = self.get_component_rich_style("viewbar--view")
        marked = self.get_component_rich_style("viewbar--shown")
        text = Text(no_wrap=True, overflow="ellipsis")
        self._spans = []
        for view, key, label in self.views:
            text.append(" ")
            start = text.cell_len
            text.append(f" {key} {label} ", style=marked if view == self.shown else normal)
            self._spans.append((start, text.cell_len, view))
        return text

    def on_click(self, event: events.Click) -> None:
        # Not a simulated key press: a focused filter field would take the digit.
        for start, end, view in self._spans:
            if start <= event.x < end:
                self.post_message(self.Selected(view))


class Section(Vertical):
    """A titled block of the detail pane whose body is plain text, cut at a bound."""

    DEFAULT_CSS = """
    Section { height: auto; margin-bottom: 1; }
    Section > .section-title { color: $text-muted; text-style: bold; }
    Section > .section-body { height: auto; }
    """

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.full_text = ""

    def compose(self) -> ComposeResult:
        yield Label(self.title, classes="section-title")
        yield Static("", classes="section-body", markup=False)

    def show(self, text: str, empty: str = "(none)") -> None:
        self.full_text = text
        body, more = preview(text)
        rendered = Text(body or empty, style="" if body else "dim")
        if more:
            rendered.append(f"\n… {more:,} more characters (press m to see more)", style="bold italic")
        self.query_one(".section-body", Static).update(rendered)
        self.set_class(bool(more), "-truncated")


class ConfirmScreen(ModalScreen[bool]):
    """Yes or no for a destructive action."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("y", "confirm", "Yes")]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            if self.detail:
                yield Static(Text(self.detail), id="detail")
            with Horizontal(id="buttons"):
                yield Button("Yes", variant="error", id="yes")
                yield Button("Cancel", id="no")

    @on(Button.Pressed, "#yes")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(False)


def hard_wrap(text: str, width: int = 1000) -> str:
    """Long lines cut into pieces: a TextArea with one huge line freezes the screen."""
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(line[i : i + width] for i in range(0, max(len(line), 1), width))
    return "\n".join(out)


class MoreScreen(ModalScreen[None]):
    """A long value in full (up to a bound), scrollable."""

    BINDINGS = [Binding("escape,m", "close", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        shown = self.text[:MORE_LIMIT]
        rest = len(self.text) - len(shown)
        with Vertical(id="dialog", classes="wide"):
            label = f"{self.title_text} — {len(self.text):,} characters"
            if rest:
                label += f" (first {len(shown):,} shown; the whole record is in the engine's journal)"
            yield Label(label)
            yield TextArea(hard_wrap(clean(shown)), read_only=True, soft_wrap=False, id="more-text")
            yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)


class StageScreen(ModalScreen[dict[str, Any] | None]):
    """Run a stage by hand: pick the stage, edit its input, optionally bind a session."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+r", "run", "Run")]

    def __init__(self, stage: str = "mutate_request") -> None:
        super().__init__()
        self.stage = stage

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label("Run a stage on every hook (ctrl+r runs, escape cancels)")
            yield Select([(s, s) for s in STAGES], value=self.stage, allow_blank=False, id="stage")
            yield Input(placeholder="session id (optional: binds the session's history)", id="session")
            yield TextArea(json.dumps(STAGE_TEMPLATES[self.stage], indent=2), language=None, id="context")
            yield Static("", id="stage-error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Run", variant="primary", id="run")
                yield Button("Cancel", id="cancel")

    @on(Select.Changed, "#stage")
    def stage_changed(self, event: Select.Changed) -> None:
        self.stage = str(event.value)
        self.query_one("#context", TextArea).text = json.dumps(STAGE_TEMPLATES.get(self.stage, {}), indent=2)

    @on(Button.Pressed, "#run")
    def action_run(self) -> None:
        text = self.query_one("#context", TextArea).text
        try:
            context = json.loads(text or "{}")
        except ValueError as exc:
            self.query_one("#stage-error", Static).update(f"the input is not JSON: {exc}")
            return
        if not isinstance(context, dict):
            self.query_one("#stage-error", Static).update("the input must be a JSON object")
            return
        session = self.query_one("#session", Input).value.strip() or None
        self.dismiss({"stage": self.stage, "context": context, "session": session})

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class ResultScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(self.title_text)
            with VerticalScroll():
                yield Static(Text(clean(self.text[:MORE_LIMIT])), markup=False)
            yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)
