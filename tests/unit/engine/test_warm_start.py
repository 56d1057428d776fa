"""Which #! lines warm starts can start (the warm starts themselves are in tests/engine/test_warm_start.py)."""

from __future__ import annotations

import pytest

from engine.warm.starts import python_interpreter


@pytest.mark.parametrize(
    ("line", "program", "lookup"),
    [
        (b"#!/usr/bin/python3", "/usr/bin/python3", None),
        (b"#!/usr/bin/python3.11 -S -u", "/usr/bin/python3.11", None),
        (b"#! /opt/venv/bin/python", "/opt/venv/bin/python", None),
        (b"#!/usr/bin/env python3", "/usr/bin/env", "python3"),
        (b"#!/usr/bin/env -S python3 -I -u", "/usr/bin/env", "python3"),
        (b"#!/usr/bin/env python3 -u", None, None),  # env would look for a program named "python3 -u"
        (b"#!/usr/bin/env -S python3 x.py", None, None),
        (b"#!/usr/bin/env -i python3", None, None),
        (b"#!/usr/bin/env FOO=1 python3", None, None),
        (b"#!/bin/sh", None, None),
        (b"#!/usr/bin/pythonista", None, None),
        (b"import os", None, None),
    ],
)
def test_which_lines_start_python(line: bytes, program: str | None, lookup: str | None) -> None:
    found = python_interpreter(line)
    assert (found.program if found else None, found.lookup if found else None) == (program, lookup)
