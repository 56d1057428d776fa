"""The two private Textual attributes the console uses, in one place.

Each saves a layout pass over the whole screen (20 ms and more under a flood of runs) where
Textual's public API has no way to say that none is needed. Each has a fallback that costs the
layout but stays correct, and `tests/unit/console/test_textual_private.py` fails loudly when the installed
Textual no longer has them. Textual is pinned to 8.2.x in pyproject.toml.
"""

from __future__ import annotations

from typing import Any

from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widget import Widget


def skip_own_layout(widget: Widget) -> None:
    """Drop the layout `widget` asked for when it was shown or hidden: the caller lays the screen out
    at once itself (`screen.refresh(layout=True)`), which covers it.

    Why: each widget shown or hidden asks for a layout through its own message queue; that request
    reaches the screen some 30 ms later and lays out and redraws the whole screen a second time.
    `Widget._layout_required` is the flag Textual 8.2 checks for it (`Widget._check_refresh`).
    Fallback: without the flag, the second layout happens (slower, still correct)."""
    if hasattr(widget, "_layout_required"):
        widget._layout_required = False


def scroll_update(view: ScrollView, size: Size) -> bool:
    """Give `view` the virtual size `size` and update its scrollbars, without a layout pass; False
    (and nothing done) when Textual has no such update, so the caller assigns `virtual_size`.

    Why: assigning `ScrollView.virtual_size` lays out the whole screen, at every new row or selected
    run. When the scrollbars neither appear nor go, Textual's own `Widget._scroll_update` (what it
    calls after a layout) is all a new size needs. Only for a change that keeps the scrollbars."""
    update: Any = getattr(view, "_scroll_update", None)
    if not callable(update):
        return False
    view.set_reactive(ScrollView.virtual_size, size)
    update(size)
    return True
