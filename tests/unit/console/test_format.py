"""Text made safe to show (evolve_console/format.py)."""

from __future__ import annotations

from evolve_console.format import clean


def test_control_characters_become_visible_and_the_rest_stays() -> None:
    assert clean("a\x00b\x1bc\x7fd") == "a\\x00b\\x1bc\\x7fd"
    assert clean("line one\n\tindented") == "line one\n\tindented"  # newline and tab are kept
    assert clean("café ✓ \u2028 日本") == "café ✓ \u2028 日本"  # printable or not, only C0 and DEL change
    everything = "".join(chr(code) for code in range(256))
    expected = "".join(
        ch if ch in "\n\t" or (ord(ch) >= 32 and ord(ch) != 127) else f"\\x{ord(ch):02x}" for ch in everything
    )
    assert clean(everything) == expected
    assert clean("") == ""
