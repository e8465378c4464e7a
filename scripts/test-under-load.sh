#!/usr/bin/env bash
# test-under-load.sh: run the README's test command three times in a row
# beside a CPU burner of two workers (busy loops), and report each run's
# result: exit status, duration and the tests that failed. The burner is
# this script's own two processes, stopped by their pids when it ends
# (normally, on error or on Ctrl-C); nothing else is touched.
#
# Not run by CI: it takes three full test runs, and is meant for a quiet
# machine where the burner is the only load. Logs go to $OUT
# (default: a new temporary directory); RUNS sets how many runs (default
# 3, the issue's bar; fewer to look for a flake in less time).
#
#   bash scripts/test-under-load.sh
#   RUNS=1 OUT=/tmp/load bash scripts/test-under-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${RUNS:-3}"
case "$runs" in
  ''|*[!0-9]*|0) echo "test-under-load: RUNS must be a whole number of runs, 1 or more (got '$runs')" >&2; exit 2 ;;
esac
workers=2
out="${OUT:-$(mktemp -d -t rlprobe-load.XXXXXX)}"
mkdir -p "$out"

# The README's test command: the first `go test` line of its Tests
# section (TestReadmeTestCommand keeps it the one .ci/run runs).
cmd=$(awk '/^## Tests/{s=1; next} /^## /{s=0} s && /^go test /{print; exit}' README.md)
if [ -z "$cmd" ]; then
  echo "test-under-load: no go test line in README.md's Tests section" >&2
  exit 1
fi

# Every run must run the tests: go test's cache would answer the second
# and third runs of an unchanged tree without running anything.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${burners[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  burners=()
}
trap stop_burners EXIT
trap 'stop_burners; exit 130' INT TERM

for _ in $(seq "$workers"); do
  bash -c 'while :; do :; done' &
  burners+=("$!")
done
echo "test-under-load: burner pids ${burners[*]}; command: $cmd (GOFLAGS=$GOFLAGS); logs in $out"

failed=0
for i in $(seq "$runs"); do
  log="$out/run-$i.log"
  begin=$(date +%s)
  status=0
  bash -c "$cmd" >"$log" 2>&1 || status=$?
  took=$(( $(date +%s) - begin ))
  if [ "$status" -eq 0 ]; then
    echo "run $i: ok in ${took}s ($log)"
  else
    failed=$((failed + 1))
    echo "run $i: FAILED (exit $status) in ${took}s ($log); failing:"
    grep -E '^(--- FAIL|FAIL|panic:)' "$log" | sed 's/^/  /' || true
  fi
done
stop_burners
echo "test-under-load: $((runs - failed)) of $runs runs green beside $workers busy workers"
[ "$failed" -eq 0 ]
