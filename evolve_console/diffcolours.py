"""The colours that tell a diff's added, removed and changed-word text apart, for the terminal's
colour depth.

The theme's backgrounds (a light tint of `$success` and `$error` over the pane) are subtle in true
colour, and drawn as they are; a terminal of 256 colours rounds each to its nearest colour, and
the dark tints round to the same near-black for added and removed lines alike. So in 256 colours
each tint is made stronger, step by step towards its theme colour, until it rounds to a colour
that looks different from the pane's and from the others'. With 16
colours no tint survives: added and removed lines are drawn in green and red, and the changed
words reversed and underlined (added) or struck through (removed). Without colour (`NO_COLOR`)
the words keep those marks, and each line keeps its sign.
"""

from __future__ import annotations

from enum import StrEnum

from rich.color import ColorSystem
from rich.style import Style
from textual.color import Color

LAYERS = ("added", "removed", "added-word", "removed-word")  # in the order they claim a colour
STEP = 0.05  # how much further towards its theme colour a tint goes at each try
# Red and green as the 16 colours' own (written as RGB: Textual repaints the named ANSI colours with
# its theme's, whose red rounds to magenta in 16 colours).
RED, GREEN = "#aa0000", "#00aa00"
APART = 40  # distance in red, green and blue (0 to 255 each) from which two colours look different


class Depth(StrEnum):
    """The colours the terminal shows."""

    TRUECOLOR = "truecolor"
    EIGHT_BIT = "256"
    STANDARD = "16"
    NONE = "none"  # NO_COLOR, or a terminal without colour


def depth_of(color_system: str | None, no_color: bool) -> Depth:
    """The depth from Rich's name of a console's colour system (`Console.color_system`)."""
    if no_color or color_system is None:
        return Depth.NONE
    if color_system == "truecolor":
        return Depth.TRUECOLOR
    if color_system == "256":
        return Depth.EIGHT_BIT
    return Depth.STANDARD  # "standard", and the legacy Windows console's 16 colours


def shown(color: Color, depth: Depth) -> tuple[int, int, int]:
    """The red, green and blue a terminal of `depth` draws for `color` (its nearest colour)."""
    rich = color.rich_color
    if depth is Depth.EIGHT_BIT:
        rich = rich.downgrade(ColorSystem.EIGHT_BIT)
    elif depth is Depth.STANDARD:
        rich = rich.downgrade(ColorSystem.STANDARD)
    red, green, blue = rich.get_truecolor()
    return red, green, blue


def apart(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Whether two colours are told apart at a glance (black and the pane's near-black are not)."""
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) >= APART**2


def layer_styles(
    depth: Depth, base: Color, tinted: dict[str, Color], tints: dict[str, Color]
) -> dict[str, Style]:
    """The style of each layer of `LAYERS` at `depth`. `base`: the pane's background; `tinted`:
    each layer's background as the theme gives it (the pane's with a tint); `tints`: the colour
    each layer tends to (the theme's success colour for the added ones, its error colour for the
    removed ones)."""
    if depth is Depth.STANDARD:
        return {
            "added": Style(color=GREEN),
            "removed": Style(color=RED),
            "added-word": Style(color=GREEN, reverse=True, underline=True, bold=True),
            "removed-word": Style(color=RED, reverse=True, strike=True, bold=True),
        }
    if depth is Depth.NONE:
        return {
            "added": Style(),
            "removed": Style(),
            "added-word": Style(underline=True, bold=True),
            "removed-word": Style(strike=True, bold=True),
        }
    if depth is Depth.TRUECOLOR:  # the theme's tints, as they are (the diff view keeps the theme's own)
        return {name: Style(bgcolor=tinted[name].rich_color) for name in LAYERS}
    taken = [shown(base, depth)]
    styles = {}
    for name in LAYERS:
        color, tint = tinted[name], tints[name]
        amount = 0.0
        while amount < 1.0 and not all(apart(shown(color.blend(tint, amount), depth), t) for t in taken):
            amount = min(amount + STEP, 1.0)
        color = color.blend(tint, amount)
        taken.append(shown(color, depth))
        styles[name] = Style(bgcolor=color.rich_color)
    return styles
