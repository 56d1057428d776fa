#!/usr/bin/env bash
# The main job: set up evolve, create the example workspace if there is none, check it, list its tools
# and show the system prompt its hooks compose for a new session.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export OPENCODE_EVOLVE_WORKSPACE=${OPENCODE_EVOLVE_WORKSPACE:-$HOME/workspace}
ws=$OPENCODE_EVOLVE_WORKSPACE
if [ ! -d "$ws/hooks" ]; then
  .venv/bin/evolve init "$ws"
fi
.venv/bin/evolve doctor
.venv/bin/evolve tools
.venv/bin/evolve stage mutate_request --input '{"session": {"id": "demo"}, "system": ["opencode default prompt"]}' --session demo
