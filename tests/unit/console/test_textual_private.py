"""The private Textual attributes behind `evolve_console.textual_private` still exist in the installed
Textual. When one of these fails, Textual renamed or dropped it: the console still works (each has a
fallback) but lays the screen out more often; see that module for what each one saves."""

from __future__ import annotations

import inspect

from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widget import Widget

from evolve_console.textual_private import scroll_update, skip_own_layout


def test_widgets_still_have_the_layout_flag() -> None:
    widget = Widget()
    assert "_layout_required" in vars(widget), "Widget._layout_required is gone: skip_own_layout does nothing"
    assert "_layout_required" in inspect.getsource(Widget._check_refresh), (
        "Textual no longer checks Widget._layout_required before it lays out: skip_own_layout does nothing"
    )
    widget.refresh(layout=True)
    assert widget._layout_required
    skip_own_layout(widget)
    assert widget._layout_required is False


def test_scroll_views_still_have_the_scrollbar_update() -> None:
    update = getattr(ScrollView, "_scroll_update", None)
    assert callable(update), "Widget._scroll_update is gone: every new table row lays the screen out"
    assert list(inspect.signature(update).parameters) == ["self", "virtual_size"]


def test_the_fallbacks_do_nothing_without_the_private_attributes() -> None:
    class Bare:
        def set_reactive(self, *args: object) -> None:
            raise AssertionError("the size is left to the caller's own assignment")

    bare = Bare()
    skip_own_layout(bare)  # type: ignore[arg-type]
    assert not hasattr(bare, "_layout_required")
    assert scroll_update(bare, Size(10, 10)) is False  # type: ignore[arg-type]
