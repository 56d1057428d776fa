#!/usr/bin/env bash
# Creates .venv and installs evolve with its test tools; re-installs only when pyproject.toml changed.
# A .venv without pip (left by a failed `python3 -m venv`, e.g. on Debian without python3-venv) is
# made again; when this Python cannot make one with pip, it says which package to install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "evolve needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ -e .venv ] && ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  echo "bootstrap: .venv is broken (no working python or pip in it); making it again" >&2
  rm -rf .venv
fi
if [ ! -e .venv ]; then
  if ! "$PYTHON" -m venv .venv >/dev/null 2>&1 || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    rm -rf .venv
    version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    echo "bootstrap: $PYTHON cannot make a virtual environment with pip; install its venv module" \
      "(Debian/Ubuntu: apt-get install python$version-venv), then run this again" >&2
    exit 1
  fi
fi
stamp=.venv/.evolve-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  echo "$want" > "$stamp"
fi
