"""tools/test.sh counts Bazel's per-test summary lines with tools/test_summary.awk (argv[1]):
every line form counts once, as passed, failed or skipped; a sharded test with some shards cached
("(2/3 cached) PASSED") counts as passed (it was dropped from the count before), and a failure is
never lost."""
import subprocess
import sys
import unittest

AWK = sys.argv.pop(1) if len(sys.argv) > 1 else "tools/test_summary.awk"

LOG = """\
INFO: Elapsed time: 465.590s, Critical Path: 136.50s
//tests/a:fresh                                                  PASSED in 0.6s
//tests/a:cached                                        (cached) PASSED in 0.1s
//tests/a:sharded                                   (2/3 cached) PASSED in 136.4s
//tests/a:flaky                                                  FLAKY, failed in 1 out of 2 in 3.0s
@ncclbind_x//pkg:external                                        PASSED in 0.2s
//tests/b:failed                                                 FAILED in 2 out of 2 in 0.4s
//tests/b:sharded_failed                            (1/3 cached) FAILED in 3 out of 3 in 2.0s
//tests/b:unbuilt                                                FAILED TO BUILD
//tests/b:no_status                                              NO STATUS
//tests/b:timeout                                                TIMEOUT in 60.0s
//tests/c:skipped                                                SKIPPED
Executed 10 out of 11 tests: 4 tests pass and 6 fail locally.
"""


def run(*options: str) -> str:
    return subprocess.run(["awk", *options, "-f", AWK], input=LOG, capture_output=True, text=True,
                          check=True).stdout


class TestSummaryTest(unittest.TestCase):
    def test_every_line_form_counts_once(self):
        self.assertEqual(run().split(), ["5", "5", "1"])  # passed (flaky too), failed, skipped

    def test_the_passing_labels_are_listed_for_the_skipped_case_scan(self):
        self.assertEqual(run("-v", "passing=1").split(), [
            "//tests/a:fresh", "//tests/a:cached", "//tests/a:sharded", "//tests/a:flaky", "@ncclbind_x//pkg:external"])


if __name__ == "__main__":
    unittest.main()
