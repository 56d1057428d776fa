#!/usr/bin/env bash
# Installs opencode (the version evolve's plugin is written and tested against) into .cache/ with npm,
# unless it is already there, and prints the binary's path. Needs Node.js with npm.
#
#   scripts/install_opencode.sh     # -> /…/.cache/opencode-1.18.33/node_modules/opencode-linux-x64/bin/opencode
#
# The same as `evolve opencode install` (evolve_demo/opencode_setup.py); $EVOLVE_CACHE_DIR moves the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh >&2
exec .venv/bin/python -m evolve_demo.opencode_setup
