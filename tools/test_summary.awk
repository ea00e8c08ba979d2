# Counts Bazel's per-test summary lines (bazel test --test_summary=short) for tools/test.sh:
# prints "PASSED FAILED SKIPPED". The lines look like
#   //pkg:name                      (cached) PASSED in 0.1s
#   //pkg:name                 (2/3 cached) PASSED in 9.0s      (a sharded test, some shards cached)
#   //pkg:name                               FAILED in 2 out of 2 in 0.4s
#   //pkg:name                               FAILED TO BUILD
#   //pkg:name                               NO STATUS / TIMEOUT / FLAKY / SKIPPED ...
# With -v passing=1 it prints instead the label of every passing (or flaky) target, one a line.
/^(\/\/|@)[^ ]+ +(\(([0-9]+\/[0-9]+ )?cached\) +)?[A-Z]/ {
  line = $0
  sub(/^[^ ]+ +(\(([0-9]+\/[0-9]+ )?cached\) +)?/, "", line)
  if (line ~ /^(PASSED|FLAKY)/) { p++; if (passing) print $1 }
  else if (line ~ /^SKIPPED/) s++
  else f++
}
END { if (!passing) printf "%d %d %d\n", p, f, s }
