#!/usr/bin/env bash
# Everything CI checks: lint, format, types, then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
.venv/bin/ruff check engine evolve_console tests bench
.venv/bin/ruff format --check engine evolve_console tests bench
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
