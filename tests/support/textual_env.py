"""Textual reads TEXTUAL_* (theme, colour system, animations, dim factor...) when it is imported: the
console's tests drop the developer's settings before any test module imports it. Imported first by
the conftest of each tier that draws the console."""

from __future__ import annotations

import os

for _key in [k for k in os.environ if k.startswith("TEXTUAL_")] + ["NO_COLOR", "FORCE_COLOR"]:
    os.environ.pop(_key, None)
