#!/usr/bin/env bash
# Everything CI checks: lint, format, types, then the whole test suite (unit, console, the wheel
# installed into a fresh venv (tests/test_packaging.py), and end-to-end against real opencode, which
# the end-to-end tests install with npm into .cache/ when it is not there; without npm they are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
# The console test that drives `evolve console` in a terminal needs tmux.
if ! command -v tmux >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -q tmux || (apt-get update -q && apt-get install -y -q tmux)) >/dev/null
fi
.venv/bin/ruff check engine evolve_console evolve_demo tests bench scripts
.venv/bin/ruff format --check engine evolve_console evolve_demo tests bench scripts
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
# The suite ran with warm starts of Python hooks on, as in production (tests/conftest.py); the tests of
# running hooks run once more with them off (~20 s), unless the caller picked tests of their own.
if [ "$#" -eq 0 ]; then
  .venv/bin/python -m pytest -q --warm-start=off \
    tests/test_runner.py tests/test_dispatch.py tests/test_discovery.py tests/test_builtins.py
fi
