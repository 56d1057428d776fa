"""Reading what the console drew: the text of an SVG screenshot."""

from __future__ import annotations

import re


def text_lines(svg: str) -> list[str]:
    """The visible text of an SVG screenshot, one entry per text element (for readable diffs)."""
    return [
        m.group(1).replace("&#160;", " ")
        for m in re.finditer(r"<text [^>]*>([^<]*)</text>", svg)
        if m.group(1).strip("&#160; ")
    ]
