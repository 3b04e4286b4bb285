#!/usr/bin/env bash
# The integration tier K times in a row (default 5) while two CPU-burning processes compete
# for the cores: every test's result in every run, a summary, and exit status 1 if any test
# failed in any run (or a run did not finish). Other load on the machine only makes the
# proof stricter.
#
#   tests/stress.sh [K] [extra pytest arguments]     e.g. tests/stress.sh 3 -k catchup
#
# Needs the project's .venv (`make test` creates it). Each run's log and JUnit report stay
# in a temporary directory, named at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-5}"
shift || true
case "$runs" in '' | *[!0-9]* | 0) echo "usage: tests/stress.sh [K >= 1] [pytest args]" >&2; exit 2 ;; esac
python=.venv/bin/python
[ -x "$python" ] || { echo "no $python: run 'make test' once first" >&2; exit 2; }
out="$(mktemp -d "${TMPDIR:-/tmp}/stress.XXXXXX")"

burners=()
run_pid=
stop_burners() {
    for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null || true; done
}
interrupted() {
    # Ctrl-C or kill: let the running session tear its servers and workers down first.
    if [ -n "$run_pid" ]; then
        kill -INT "$run_pid" 2>/dev/null || true
        wait "$run_pid" 2>/dev/null || true
    fi
    echo "stress: interrupted"
    exit 130
}
trap stop_burners EXIT
trap interrupted INT TERM
for _ in 1 2; do
    (while :; do :; done) &
    burners+=("$!")
done
echo "stress: $runs run(s) of tests/integration beside 2 CPU burners (pids ${burners[*]})"

status=0
for i in $(seq 1 "$runs"); do
    started=$(date +%s)
    set +e -m  # job control: the run gets its own process group and keeps SIGINT
    # Its own --basetemp: a session in pytest's shared one makes it private again, which
    # other sessions of the same user may depend on (see tests/conftest.py, service_tmp).
    "$python" -m pytest tests/integration -q -p no:cacheprovider --basetemp="$out/tmp-$i" \
        --junitxml="$out/run-$i.xml" "$@" >"$out/run-$i.log" 2>&1 &
    run_pid=$!
    wait "$run_pid"
    code=$?
    run_pid=
    set -e +m
    [ "$code" -eq 0 ] || status=1
    echo "run $i/$runs: $(tail -n 1 "$out/run-$i.log") (exit $code, $(($(date +%s) - started)) s wall)"
done
stop_burners
trap - EXIT

"$python" - "$out" "$runs" <<'EOF' || status=1
"""Per test, its result in each run (P passed, F failed, E error, S skipped, - absent)."""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

out, runs = Path(sys.argv[1]), int(sys.argv[2])
results: dict[str, list[str]] = {}
for i in range(runs):
    report = out / f"run-{i + 1}.xml"
    cases = ET.parse(report).getroot().iter("testcase") if report.exists() else []
    for case in cases:
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        mark = "F" if "failure" in kinds else "E" if "error" in kinds else "S" if "skipped" in kinds else "P"
        results.setdefault(name, ["-"] * runs)[i] = mark
width = max((len(n) for n in results), default=10)
print(f"\n{'test':<{width}}  " + " ".join(f"{i + 1:>2}" for i in range(runs)))
for name in sorted(results):
    print(f"{name:<{width}}  " + " ".join(f"{m:>2}" for m in results[name]))
bad = {n: r for n, r in results.items() if set(r) & {"F", "E", "-"}}
per_run = [
    sum(r[i] == "P" for r in results.values()) for i in range(runs)
]
print(f"\nsummary: {len(results)} tests x {runs} runs; passed per run: {per_run}")
print(f"summary: {sum(r.count('F') + r.count('E') for r in results.values())} failure(s), "
      f"{len(bad)} test(s) not passing every run")
for name, marks in sorted(bad.items()):
    print(f"  not always passing: {name}  {' '.join(marks)}")
sys.exit(1 if bad else 0)
EOF
echo "logs and JUnit reports: $out"
[ "$status" -eq 0 ] && echo "stress: PASS ($runs runs, 0 failures)" || echo "stress: FAIL"
exit "$status"
