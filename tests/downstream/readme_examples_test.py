"""docs/install.md's "Use it from your project" examples, run exactly as written: the C program
is compiled with the guide's gcc line against this checkout's files and run against a real
libnccl (no GPU here: NCCL fails at ncclCommInitRank and the program must print NCCL's
result name and message), then against no libnccl at all; the Python snippet runs too. The Rust
example runs in //tests/downstream:rust_crate_test, which needs cargo."""
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

GUIDE = "docs/install.md"
SECTION = "## Use it from your project"
EP_SECTION = "### NCCL EP from C"  # its last subsection, tested by EpCExample


def readme_blocks(ep: bool = False) -> list[tuple[str, str]]:
    """(language, code) of every fenced block in the section (without its EP subsection), in
    order; ep: of the EP subsection alone."""
    text = pathlib.Path(GUIDE).read_text()
    assert text.count(SECTION) == 1, SECTION
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    assert section.count(EP_SECTION) == 1, EP_SECTION
    section = section.split(EP_SECTION, 1)[1 if ep else 0]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.S | re.M)


def blocks(language: str, ep: bool = False) -> list[str]:
    """The section's ```language blocks, in order (the sh blocks: C's first, then Rust's)."""
    return [code for lang, code in readme_blocks(ep) if lang == language]


def block(language: str) -> str:
    found = blocks(language)
    assert len(found) == 1, f"one ```{language} block in the section, found {len(found)}"
    return found[0]


class CExample(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = pathlib.Path(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")))
        (cls.work / "all_reduce.c").write_text(block("c"))
        # The sh block builds and runs; its last line runs the program, whose status is checked below.
        cls.env = dict(os.environ, NCCLBIND=os.getcwd(), NCCLBIND_NCCL_PATH=os.path.abspath(
            os.environ["NCCLBIND_NCCL_PATH"]))
        cls.result = subprocess.run(["bash", "-c", blocks("sh")[0]], cwd=cls.work, env=cls.env, capture_output=True,
                                    text=True, timeout=120)

    def test_it_builds_without_warnings_and_reports_nccls_own_failure(self):
        self.assertTrue((self.work / "all_reduce").exists(), self.result.stderr)
        self.assertNotIn("warning", self.result.stderr)
        self.assertEqual(self.result.stdout, f"NCCL {os.environ['NCCL_VERSION_CODE']}\n")
        self.assertEqual(self.result.returncode, 1, self.result.stderr)
        # e.g. "ncclCommInitRank: ncclUnhandledCudaError: Cuda failure 'CUDA driver version is insufficient ...'"
        match = re.fullmatch(r"ncclCommInitRank: (ncclUnhandledCudaError|ncclSystemError|ncclInternalError|"
                             r"ncclInvalidUsage): (.+)\n", self.result.stderr)
        self.assertIsNotNone(match, self.result.stderr)
        self.assertGreater(len(match.group(2)), 10, "NCCL's message (ncclGetLastError) is missing")

    def test_without_libnccl_it_prints_ncclbinds_reason(self):
        env = dict(self.env, NCCLBIND_NCCL_PATH=str(self.work / "no-such-libnccl.so.2"))
        result = subprocess.run([str(self.work / "all_reduce")], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout, "")
        first = result.stderr.splitlines()[0]
        self.assertEqual(first, "ncclGetVersion: NCCLBIND_ERROR_LIBRARY_NOT_FOUND: libnccl could not be loaded; "
                                "tried, in order:")
        self.assertRegex(result.stderr, r"\n  2\. /.*/no-such-libnccl\.so\.2 \[NCCLBIND_NCCL_PATH\]: .*No such file")


class EpCExample(unittest.TestCase):
    """The EP example, built as written; without a GPU it runs up to its first failure: against
    the oldest libnccl, loading libnccl_ep (the versions named, from BUILD's header sets); against
    the one libnccl_ep needs, with the CUDA driver stub, NCCL's own failure at ncclCommInitRank."""

    @classmethod
    def setUpClass(cls):
        cls.work = pathlib.Path(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")))
        c_blocks, sh_blocks = blocks("c", ep=True), blocks("sh", ep=True)
        assert len(c_blocks) == 1 and len(sh_blocks) == 1, (len(c_blocks), len(sh_blocks))
        (cls.work / "ep.c").write_text(c_blocks[0])
        cls.ep_library = os.path.realpath(os.environ["NCCL_EP_PATH"])
        cls.env = dict(os.environ, NCCLBIND=os.getcwd(), NCCLBIND_NCCL_EP_PATH=cls.ep_library,
                       NCCLBIND_NCCL_PATH=os.path.abspath(os.environ["NCCLBIND_NCCL_PATH"]))
        cls.result = subprocess.run(["bash", "-c", sh_blocks[0]], cwd=cls.work, env=cls.env, capture_output=True,
                                    text=True, timeout=120)

    def test_it_builds_without_warnings(self):
        self.assertTrue((self.work / "ep").exists(), self.result.stderr)
        self.assertNotIn("warning", self.result.stderr)

    def test_on_an_older_libnccl_it_prints_the_versions(self):
        self.assertEqual(self.result.returncode, 1, self.result.stderr)
        self.assertEqual(self.result.stdout, "")
        old = os.path.realpath(os.environ["NCCLBIND_NCCL_PATH"])
        self.assertTrue(self.result.stderr.startswith(
            f"ncclEpGetVersion: NCCLBIND_ERROR_LIBRARY_NOT_FOUND: libnccl_ep {os.environ['NCCL_EP_VERSION']} at "
            f"{self.ep_library} needs NCCL {os.environ['NCCL_FOR_EP_VERSION']} or newer, but the libnccl in use is "
            f"NCCL {os.environ['NCCL_VERSION']} ({old})"), self.result.stderr)

    def test_on_the_libnccl_it_needs_it_reaches_nccl(self):
        env = dict(self.env, NCCLBIND_NCCL_PATH=os.path.abspath(os.environ["NCCL_FOR_EP_PATH"]),
                   LD_PRELOAD=os.path.abspath(os.environ["CUDA_STUB"]))
        result = subprocess.run([str(self.work / "ep")], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.stdout, f"NCCL EP {os.environ['NCCL_EP_VERSION_CODE']}\n", result.stderr)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, r"^ncclCommInitRank: nccl[A-Za-z]+: .{10,}\n$")


class PythonExample(unittest.TestCase):
    def test_the_snippet_runs_and_shows_versions(self):
        result = subprocess.run([sys.executable, "-c", block("python")], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        self.assertEqual(result.returncode, 0, result.stderr)
        code = int(os.environ["NCCL_VERSION_CODE"])
        version = f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
        self.assertIn(f"\n  libnccl {version}", result.stdout)
        self.assertRegex(result.stdout, r"\n  libnccl_ep(: absent: .*tried, in order:\n +1\. | [0-9])")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
