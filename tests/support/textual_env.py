"""Textual reads TEXTUAL_* (theme, colour system, animations, dim factor...) when it is imported: the
console's tests drop the developer's settings before any test module imports it. Imported first by
the conftest of each tier that draws the console."""

from __future__ import annotations

import os

for _key in [k for k in os.environ if k.startswith("TEXTUAL_")] + ["NO_COLOR", "FORCE_COLOR"]:
    os.environ.pop(_key, None)

# The console draws for the colours of its terminal (a diff's added and removed lines, for one): the
# tests draw for a terminal of true colour, as the snapshots are taken, whatever terminal runs them;
# a test of another depth sets TERM and COLORTERM itself before it starts the app.
os.environ["TERM"] = "xterm-256color"
os.environ["COLORTERM"] = "truecolor"
