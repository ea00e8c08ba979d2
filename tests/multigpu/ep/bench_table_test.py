"""bench_table.py's merge of the EP benchmarks' BENCH lines, on sample lines (no GPU)."""
import io
import pathlib
import subprocess
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_table  # noqa: E402

DECODE = '"tokens": 128, "hidden": 7168, "topk": 8, "experts": 256, "dtype": "bf16"'


def line(layer, algo, phase, median, size=DECODE):
    return f'BENCH {{"layer": "{layer}", "algo": "{algo}", "phase": "{phase}", {size}, ' \
           f'"us_median": {median}, "us_p10": {median * 0.9}}}\n'


SAMPLE = [
    "libnccl 23203, libnccl_ep 200, 2 ranks\n",
    line("c", "ll", "dispatch", 20.0),
    line("c", "ll", "combine", 30.0),
    line("rust", "ll", "dispatch", 20.2),
    line("python", "ll", "dispatch", 21.0),
    line("python_raw", "ll", "dispatch", 20.1),
    line("c", "ht", "dispatch", 100.0),
    "PASS: 2 ranks, 2 passed, 0 failed\n",
]


class Merge(unittest.TestCase):
    def test_lines_of_every_layer_merge_into_one_row_per_algo_phase_and_size(self):
        rows = bench_table.parse(SAMPLE)
        key = ("ll", "dispatch", 128, 7168, 8, 256, "bf16")
        self.assertEqual(rows[key], {"c": [20.0], "rust": [20.2], "python": [21.0], "python_raw": [20.1]})
        self.assertEqual(rows[("ll", "combine", 128, 7168, 8, 256, "bf16")], {"c": [30.0]})
        self.assertEqual(len(rows), 3)

    def test_the_table_shows_percent_over_c_and_dashes_for_missing_layers(self):
        text = bench_table.table(bench_table.parse(SAMPLE))
        lines = text.splitlines()
        self.assertEqual(lines[0].split(), ["algo", "phase", "size", "C", "us", "C", "GB/s", "Rust", "us",
                                            "Python", "us", "Python", "raw", "us"])
        dispatch = next(l for l in lines if l.startswith("ll") and "dispatch" in l)
        self.assertIn("20.0", dispatch)
        self.assertIn("20.2 (+1.0%)", dispatch)
        self.assertIn("21.0 (+5.0%)", dispatch)
        self.assertIn("20.1 (+0.5%)", dispatch)
        self.assertIn("128x7168 top8/256 bf16", dispatch)
        # 128 tokens x top-8 x 7168 x 2 B = 14680064 B in 20 us: 734.0 GB/s; 30 us: 489.3
        self.assertEqual(dispatch.split()[5:7], ["20.0", "734.0"])
        combine = next(l for l in lines if l.startswith("ll") and "combine" in l)
        self.assertEqual(combine.split()[5:7], ["30.0", "489.3"])
        self.assertEqual(combine.split()[-3:], ["-", "-", "-"])
        # LL before HT, dispatch before combine
        self.assertLess(lines.index(dispatch), lines.index(combine))
        self.assertTrue(lines[-1].startswith("ht"))

    def test_the_goal_lines_say_which_layer_meets_two_percent(self):
        goals = bench_table.goal_lines(bench_table.parse(SAMPLE))
        self.assertIn("meets the 2% goal: rust ll dispatch 128x7168 top8/256 bf16: +1.0% over C "
                      "(1 rounds of rust, 1 of C)", goals)
        self.assertIn("misses the 2% goal: python ll dispatch 128x7168 top8/256 bf16: +5.0% over C "
                      "(1 rounds of python, 1 of C)", goals)
        self.assertEqual(len(goals), 2)

    def test_rounds_of_one_layer_and_size_are_kept_and_judged_by_their_median(self):
        rounds = [line("c", "ll", "dispatch", 20.0), line("rust", "ll", "dispatch", 30.0),
                  line("c", "ll", "dispatch", 19.0), line("rust", "ll", "dispatch", 19.1),
                  line("c", "ll", "dispatch", 21.0), line("rust", "ll", "dispatch", 20.3)]
        rows = bench_table.parse(rounds)
        self.assertEqual(rows[("ll", "dispatch", 128, 7168, 8, 256, "bf16")],
                         {"c": [20.0, 19.0, 21.0], "rust": [30.0, 19.1, 20.3]})
        # One slow round of Rust (30.0) does not decide: the median of its rounds (20.3) is +1.5% over C's (20.0).
        self.assertEqual(bench_table.goal_lines(rows),
                         ["meets the 2% goal: rust ll dispatch 128x7168 top8/256 bf16: +1.5% over C "
                          "(3 rounds of rust, 3 of C)"])
        dispatch = bench_table.table(rows).splitlines()[2]
        self.assertIn("20.0 [19.0..21.0]", dispatch)
        self.assertIn("20.3 [19.1..30.0] (+1.5%)", dispatch)

    def test_each_layer_is_also_judged_against_its_raw_calls_of_the_same_process(self):
        lines = [line("c", "ll", "dispatch", 40.0),
                 line("rust", "ll", "dispatch", 40.2), line("rust_raw", "ll", "dispatch", 40.0),
                 line("rust", "ll", "dispatch", 44.0), line("rust_raw", "ll", "dispatch", 43.9),
                 line("python", "ll", "dispatch", 42.0), line("python_raw", "ll", "dispatch", 41.0)]
        rows = bench_table.parse(lines)
        # per round: rust +0.5%, +0.23%: median +0.4%; python +2.4%
        self.assertEqual(bench_table.layer_lines(rows), [
            "rust over its raw calls, same process: ll dispatch 128x7168 top8/256 bf16: +0.4% (under 2%; "
            "median of 2 rounds)",
            "python over its raw calls, same process: ll dispatch 128x7168 top8/256 bf16: +2.4% (over 2%; "
            "median of 1 rounds)"])
        header = bench_table.table(rows).splitlines()[0]
        self.assertIn("Rust raw us", header)
        self.assertLess(header.index("Rust us"), header.index("Rust raw us"))

    def test_python_and_its_raw_calls_are_also_judged_against_c_in_their_process(self):
        lines = [line("python", "ll", "dispatch", 41.0), line("python_raw", "ll", "dispatch", 40.6),
                 line("c_in_python", "ll", "dispatch", 40.0),
                 line("python", "ll", "dispatch", 45.0), line("python_raw", "ll", "dispatch", 44.5),
                 line("c_in_python", "ll", "dispatch", 44.0)]
        rows = bench_table.parse(lines)
        # per round: python over raw +0.99%, +1.12%: median +1.1%; python over C +2.5%, +2.27%: +2.4%;
        # raw over C +1.5%, +1.14%: +1.3%
        self.assertEqual(bench_table.layer_lines(rows), [
            "python over its raw calls, same process: ll dispatch 128x7168 top8/256 bf16: +1.1% (under 2%; "
            "median of 2 rounds)",
            "python over the C calls, same process: ll dispatch 128x7168 top8/256 bf16: +2.4% (over 2%; "
            "median of 2 rounds)",
            "python_raw over the C calls, same process: ll dispatch 128x7168 top8/256 bf16: +1.3% (under 2%; "
            "median of 2 rounds)"])
        header = bench_table.table(rows).splitlines()[0]
        self.assertTrue(header.rstrip().endswith("C in Python's process us"), header)

    def test_prepared_steps_are_a_column_of_their_own_judged_like_the_methods(self):
        lines = [line("c", "ll", "dispatch", 40.0),
                 line("python", "ll", "dispatch", 41.0), line("python_prepared", "ll", "dispatch", 40.4),
                 line("python_raw", "ll", "dispatch", 40.6), line("c_in_python", "ll", "dispatch", 40.0)]
        rows = bench_table.parse(lines)
        self.assertIn("python_prepared over the C calls, same process: ll dispatch 128x7168 top8/256 bf16: +1.0% "
                      "(under 2%; median of 1 rounds)", bench_table.layer_lines(rows))
        self.assertIn("meets the 2% goal: python_prepared ll dispatch 128x7168 top8/256 bf16: +1.0% over C "
                      "(1 rounds of python_prepared, 1 of C)", bench_table.goal_lines(rows))
        header = bench_table.table(rows).splitlines()[0]
        self.assertLess(header.index("Python us"), header.index("Python prepared us"))
        self.assertLess(header.index("Python prepared us"), header.index("Python raw us"))

    def test_a_broken_line_names_its_number(self):
        with self.assertRaisesRegex(ValueError, "line 2: not a BENCH record"):
            bench_table.parse(["x\n", 'BENCH {"layer": "c"}\n'])
        with self.assertRaisesRegex(ValueError, "line 1: unknown layer 'go'"):
            bench_table.parse([line("go", "ll", "dispatch", 1.0)])

    def test_the_script_reads_stdin_and_files(self):
        script = str(pathlib.Path(bench_table.__file__))
        from_stdin = subprocess.run([sys.executable, script], input="".join(SAMPLE), capture_output=True, text=True)
        self.assertEqual(from_stdin.returncode, 0, from_stdin.stderr)
        self.assertIn("20.2 (+1.0%)", from_stdin.stdout)
        empty = subprocess.run([sys.executable, script], input="nothing\n", capture_output=True, text=True)
        self.assertEqual((empty.returncode, empty.stdout), (1, "no BENCH lines\n"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
