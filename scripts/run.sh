#!/usr/bin/env bash
# The main job: install evolve into .venv and open the operator console on the workspace
# ($OPENCODE_EVOLVE_WORKSPACE, else ~/workspace). With no workspace yet, the console creates the
# example one and starts its engine, so it shows a working agent runtime before opencode is connected.
#
#   ./scripts/run.sh --demo     the offline demo instead: `evolve demo` (see the README)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
if [ "${1:-}" = "--demo" ]; then
  shift
  exec .venv/bin/evolve demo "$@"
fi
exec .venv/bin/evolve console "$@"
