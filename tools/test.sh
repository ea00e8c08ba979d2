#!/usr/bin/env bash
# Set up the machine (tools/setup.sh --wheel: with the wheel tools //tests/downstream:wheel_test uses), then `bazel test //...` (extra arguments are passed
# on to bazel), with output for CI. The last line printed is always a summary of the form
#   N passed, N failed[, N skipped]
# counted from Bazel's per-test summary lines. The exit status is Bazel's.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh --wheel

log=$(mktemp "${TMPDIR:-/tmp}/ncclbind-test.XXXXXX")
trap 'rm -f "$log"' EXIT

# --keep_going: one broken target still lets every other test run and be counted.
# (--test_output=errors and the rest come from .bazelrc.)
rc=0
bazel test //... \
  --keep_going \
  --test_summary=short \
  --color=no \
  --curses=no \
  --show_progress_rate_limit=10 \
  "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}

read -r passed failed skipped < <(awk -f tools/test_summary.awk "$log")

# A package that fails to load has no summary line for its tests: each such package counts as
# one failed target (its targets never ran), named here.
mapfile -t broken < <(grep -aoE "error loading package '[^']*'|package contains errors: [^ ]+" "$log" |
  sed -E "s/^error loading package '(.*)'$/\1/; s/^package contains errors: //" | sort -u)
if ((${#broken[@]})); then
  echo "test.sh: ${#broken[@]} package(s) failed to load, each counted as 1 failed: ${broken[*]}"
  failed=$((failed + ${#broken[@]}))
fi
if ((rc != 0 && failed == 0)); then
  echo "test.sh: bazel exited with status $rc and no failing test (a build or loading error): counted as 1 failed"
  failed=1
fi
# Cases skipped inside a passing target (a missing optional package, say) would otherwise vanish
# into that target's PASSED: list them. pytest says "N passed, M skipped", unittest "OK (skipped=M)",
# and the C tests print a line "SKIP <what>: <why>". A sharded target's log is one per shard.
skipped_cases=0
while IFS= read -r testlog; do
  n=$(grep -aoE '^(=+ )?[0-9]+ passed, ([0-9]+ [a-z]+, )*[0-9]+ skipped' "$testlog" | tail -1 | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || true)
  [[ -n "$n" ]] || n=$(grep -aoE '^OK \(skipped=[0-9]+\)' "$testlog" | tail -1 | grep -oE '[0-9]+' || true)
  [[ -n "$n" && "$n" != 0 ]] || n=$(grep -acE '^SKIP ' "$testlog" || true)
  if [[ -n "$n" && "$n" != 0 ]]; then
    skipped_cases=$((skipped_cases + n))
    why=$(grep -aoE 'SKIPPED \[[0-9]+\] [^:]+:[0-9]+: .*|^SKIP .*|\.\.\. skipped .*' "$testlog" | head -3 | sed 's/^SKIPPED //' | paste -sd';' -)
    echo "skipped cases in ${testlog#bazel-testlogs/}: $n ($why)"
  fi
done < <(awk -v passing=1 -f tools/test_summary.awk "$log" | awk '{
    label = $1; sub(/^\/\//, "", label); sub(/:/, "/", label); print "bazel-testlogs/" label }' |
  while IFS= read -r dir; do
    # a sharded target's logs are its shards' (a test.log beside them is left from an earlier,
    # unsharded run of the same output base)
    shards=("$dir"/shard_*/test.log)
    if [[ -f ${shards[0]} ]]; then printf '%s\n' "${shards[@]}"; elif [[ -f $dir/test.log ]]; then echo "$dir/test.log"; fi
  done | sort)  # this run's targets only
if ((skipped_cases)); then echo "cases skipped inside passing targets: $skipped_cases"; fi
summary="$passed passed, $failed failed"
if ((skipped)); then summary+=", $skipped skipped"; fi
echo "$summary"
exit "$rc"
