"""tests/multigpu/launch.py on a CPU: ranks spawned with their rank, count and arguments, a failing
rank named, a hung rank killed at the deadline, the rank count from a command line or a SKIPPED
line, NVLS kept off in every rank, and a named library that does not load stopping the rank."""
from __future__ import annotations

import contextlib
import io
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import launch  # noqa: E402


def record_rank(rank, nranks, directory, word):
    """Writes what the rank was given and whether NVLS was off in it."""
    off = all(os.environ.get(k) == v for k, v in launch.NVLS_OFF.items())
    pathlib.Path(directory, f"rank{rank}").write_text(f"{nranks} {word} {off}")


def fail_rank_one(rank, nranks):
    if rank == 1:
        sys.exit(3)


def hang_rank_zero(rank, nranks):
    if rank == 0:
        time.sleep(120)


def run_quietly(*args, **kwargs):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = launch.run_ranks(*args, **kwargs)
    return status, out.getvalue()


class RunRanks(unittest.TestCase):
    def test_every_rank_gets_its_rank_the_count_and_the_arguments_with_nvls_off(self):
        with tempfile.TemporaryDirectory() as directory:
            status, out = run_quietly(record_rank, 3, (directory, "word"), timeout=120, name="record")
            self.assertEqual(status, 0, out)
            self.assertIn("record: 3 ranks, 3 passed, 0 failed", out)
            self.assertEqual(sorted(p.name for p in pathlib.Path(directory).iterdir()), ["rank0", "rank1", "rank2"])
            for rank in range(3):
                self.assertEqual(pathlib.Path(directory, f"rank{rank}").read_text(), "3 word True")

    def test_a_failing_rank_fails_the_run_and_is_named(self):
        status, out = run_quietly(fail_rank_one, 3, timeout=120, name="fails")
        self.assertEqual(status, 1)
        self.assertIn("fails: 3 ranks, 2 passed, 1 failed (ranks 1)", out)

    def test_a_hung_rank_is_killed_at_the_deadline_and_named(self):
        t0 = time.monotonic()
        status, out = run_quietly(hang_rank_zero, 2, timeout=3, name="hangs")
        self.assertLess(time.monotonic() - t0, 60, "the hung rank was not killed at the deadline")
        self.assertEqual(status, 1)
        self.assertIn("FAIL rank 0 still running after 3 s", out)
        self.assertIn("hangs: 2 ranks, 1 passed, 1 failed (ranks 0)", out)


class RanksToRun(unittest.TestCase):
    def ask(self, argv, devices, default=None):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            return launch.ranks_to_run(argv, devices, default), out.getvalue()

    def test_the_first_positional_argument_else_the_default_else_every_gpu(self):
        self.assertEqual(self.ask(["--bench", "1"], 2), (1, ""))
        self.assertEqual(self.ask(["--bench"], 2), (2, ""))
        self.assertEqual(self.ask([], 4, default=2), (2, ""))

    def test_no_gpu_or_too_few_skip_with_the_line_the_scripts_look_for(self):
        self.assertEqual(self.ask(["2"], 0), (None, "SKIPPED: no GPU\n"))
        self.assertEqual(self.ask(["3"], 2), (None, "SKIPPED: 3 ranks asked, 2 GPUs present\n"))

    def test_a_rank_count_below_one_is_refused(self):
        with self.assertRaisesRegex(SystemExit, "at least 1, not 0"):
            self.ask(["0"], 2)


class Environment(unittest.TestCase):
    def test_importing_sets_nvls_off(self):
        for variable, value in launch.NVLS_OFF.items():
            self.assertEqual(os.environ.get(variable), value, variable)

    def test_a_named_library_that_does_not_load_stops_the_rank_naming_the_variable(self):
        program = "import sys; sys.path.insert(0, sys.argv[1]); import launch; launch.load_named_libraries_first()"
        env = dict(os.environ, NCCLBIND_NCCL_PATH="/nonexistent/libnccl.so.2", PYTHONPATH=os.pathsep.join(sys.path))
        run = subprocess.run([sys.executable, "-c", program, str(HERE)], capture_output=True, text=True, env=env,
                             timeout=120)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("NCCLBIND_NCCL_PATH=/nonexistent/libnccl.so.2: ", run.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
