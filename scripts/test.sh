#!/usr/bin/env bash
# Everything CI checks: lint, format, types, then every tier of tests (tests/README.md):
#   tests/unit      starts no process (enforced); the fast tier, run before each commit
#   tests/engine    the engine with real hooks, git, SQLite and engine processes
#   tests/console   the console (Pilot, snapshots, tmux) against real engines
#   tests/project   the boundaries, the docs' examples, the wheel installed into a fresh venv, set-up
#   tests/e2e       real opencode (installed with npm into .cache/ when missing; skipped without npm)
#
#   ./scripts/test.sh                 lint, types and the whole suite (what CI runs)
#   ./scripts/test.sh --fast          lint and the fast tier only
#   ./scripts/test.sh [--fast] ARGS   the same, on the tests ARGS pick (pytest's arguments)
#
# The suite runs with warm starts of Python hooks on, as in production; the tests marked `hooks` (those
# that run hooks) run once more with them off. Either pass says what it ran, and when it runs nothing.
#
# The tests run in parallel workers (pytest-xdist, --dist loadgroup: a module's costly fixture may keep
# its tests in one worker, tests/README.md): most of them wait on engines, git and opencode more than
# they compute, so the first pass runs twice as many workers as there are cores (at most 8); the fast
# tier and the second pass (cold hooks against short timeouts), one per core. EVOLVE_TEST_WORKERS=N sets the number, 0 runs in this process (for --pdb, -s);
# pytest's own -n or -p no:xdist in ARGS wins.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
./scripts/bootstrap.sh
# The console test that drives `evolve console` in a terminal needs tmux.
if [ "$fast" = 0 ] && ! command -v tmux >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -q tmux || (apt-get update -q && apt-get install -y -q tmux)) >/dev/null
fi
# The web console's test drives a real headless Chromium (Debian's `chromium`).
if [ "$fast" = 0 ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -q chromium || (apt-get update -q && apt-get install -y -q chromium)) >/dev/null
fi
.venv/bin/ruff check engine evolve_console evolve_demo tests bench scripts
.venv/bin/ruff format --check engine evolve_console evolve_demo tests bench scripts
cores=$(nproc 2>/dev/null || echo 2)
# pytest with N workers (none when N is 0 or ARGS choose themselves).
# -B: this process compiles the checkout without writing it down (tests/conftest.py sends the workers'
# and every started process's compiled modules to the run's temporary directory).
pytest_with() {
  local n=${EVOLVE_TEST_WORKERS:-$1}
  shift
  local parallel=(-n "$n" --dist loadgroup)
  for arg in "$@"; do
    case "$arg" in
      -n | -n* | --numprocesses* | no:xdist | --pdb | --trace) parallel=() ;;
    esac
  done
  if [ "$n" = 0 ]; then
    parallel=()
  fi
  .venv/bin/python -B -m pytest -q "${parallel[@]}" "$@"
}
if [ "$fast" = 1 ]; then
  if [ "$#" -eq 0 ]; then
    set -- tests/unit
  fi
  echo "fast tier: pytest $* (no process started; the whole suite is ./scripts/test.sh)"
  pytest_with "$cores" "$@"
  exit
fi
# Both passes share one directory of compiled modules, removed at the end. A collection beside mypy
# fills it (the test modules with pytest's assertions rewritten, what they import): otherwise each
# worker of each pass would compile all of it again, ~5 s of CPU apiece.
EVOLVE_TESTS_PYCACHE=$(mktemp -d "${TMPDIR:-/tmp}/evolve-pycache-XXXXXX")
export EVOLVE_TESTS_PYCACHE
collecting=
# On any exit: the collection ended first (it would write into the removed directory), then it removed.
cleanup() {
  if [ -n "$collecting" ]; then
    kill "$collecting" 2>/dev/null || true
    wait "$collecting" 2>/dev/null || true
  fi
  rm -rf "$EVOLVE_TESTS_PYCACHE"
}
trap cleanup EXIT
.venv/bin/python -B -m pytest -q --collect-only -p no:cacheprovider "$@" >/dev/null 2>&1 &
collecting=$!
.venv/bin/mypy
wait "$collecting" || true # a collection that fails says why in pass 1
collecting=
echo "pass 1 of 2: pytest ${*:-tests} (warm starts on)"
pytest_with $((cores * 2 > 8 ? 8 : cores * 2)) "$@"
echo "pass 2 of 2: the tests marked hooks among them, with warm starts off"
status=0
# One worker per core: these tests start hooks cold, many of them against timeouts of a few hundred ms.
pytest_with "$cores" --warm-start=off -m hooks "$@" || status=$?
if [ "$status" = 5 ]; then
  echo "pass 2 of 2: none of the tests picked runs hooks: nothing to run with warm starts off"
elif [ "$status" != 0 ]; then
  exit "$status"
fi
