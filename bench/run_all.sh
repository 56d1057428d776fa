#!/usr/bin/env bash
# Runs the engine benchmarks one after the other, printing their figures as they come,
# then a summary of each one's final line. Figures only: nothing here fails on timing; the exit
# status is non-zero only if a benchmark itself crashed.
# Usage: bench/run_all.sh   (from anywhere; uses the project's .venv/bin/python)
set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="$root/.venv/bin/python"
[ -x "$python" ] || { echo "run_all.sh: $python not found (create the venv first)" >&2; exit 2; }

logs="$(mktemp -d -t evolve-bench-logs-XXXXXX)"
trap 'rm -rf "$logs"' EXIT
status=0
names=(dispatch_overhead discovery_scaling validation_history replay_speed shim_traffic blocking_hook opencode_overhead)
for name in "${names[@]}"; do
    echo "=== $name ==="
    started=$SECONDS
    (cd "$root" && "$python" "bench/$name.py") 2>&1 | tee "$logs/$name.txt"
    rc=$?
    [ "$rc" = 0 ] || { status=1; echo "($name exited with status $rc)" >>"$logs/$name.txt"; }
    echo "($name took $((SECONDS - started)) s)"
    echo
done
echo "=== summary ==="
for name in "${names[@]}"; do
    tail -n 1 "$logs/$name.txt"
done
exit "$status"
