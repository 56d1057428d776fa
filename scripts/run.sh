#!/usr/bin/env bash
# The main job: install evolve into .venv and open the operator console on the workspace
# ($OPENCODE_EVOLVE_WORKSPACE, else ~/workspace). With no workspace yet, the console creates the
# example one and starts its engine, so it shows a working agent runtime before opencode is connected.
#
#   ./scripts/run.sh [--workspace DIR]... [--attach URL --token-file F]... [--web] [--no-bell]    evolve console's options
#   ./scripts/run.sh --demo [--dir DIR] [--heartbeat-ms MS]                     the offline demo instead:
#                                                                               `evolve demo` (see the README)
#
# An option neither knows is refused before anything is installed, with the nearest one it knows
# (`--dmeo`: did you mean --demo?). tests/project/test_run_script.py keeps these lists equal to the
# options of `evolve console` and `evolve demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
CONSOLE_OPTIONS="--demo --workspace --attach --token --token-file --ca --agents --web --web-host --web-port --web-token-file --behind-tunnel --no-bell --help -h"
DEMO_OPTIONS="--dir --heartbeat-ms --help -h"
known=$CONSOLE_OPTIONS
[ "${1:-}" = "--demo" ] && known=$DEMO_OPTIONS
for arg in "${@:$([ "${1:-}" = "--demo" ] && echo 2 || echo 1)}"; do
  case "$arg" in
    --*=*) option=${arg%%=*} ;;
    -*) option=$arg ;;
    *) continue ;;
  esac
  if [ "$option" = "--demo" ]; then
    echo "run.sh: --demo comes first: ./scripts/run.sh --demo [--dir DIR] [--heartbeat-ms MS]" >&2
    exit 2
  fi
  case " $known " in
    *" $option "*) continue ;;
  esac
  nearest=$("${PYTHON:-python3}" -c 'import difflib, sys
found = difflib.get_close_matches(sys.argv[1], sys.argv[2:], n=1, cutoff=0.6)
print(found[0] if found else "")' "$option" $known 2>/dev/null || true)
  echo "run.sh: unknown option $option${nearest:+; did you mean $nearest?} (it knows: $known)" >&2
  exit 2
done
./scripts/bootstrap.sh
if [ "${1:-}" = "--demo" ]; then
  shift
  exec .venv/bin/evolve demo "$@"
fi
exec .venv/bin/evolve console "$@"
