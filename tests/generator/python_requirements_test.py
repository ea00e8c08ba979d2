"""The generator on a Python other than Debian's: it finds Debian's libclang bindings from
any Python, says exactly what to install when they are missing, and help never runs set-up.

Each case starts a fresh /usr/bin/python3 (Debian's, which has clang.cindex only in
/usr/lib/python3/dist-packages) and takes that folder off sys.path, as a pyenv or venv
Python would not have it."""
import os
import pathlib
import shutil
import subprocess
import sys
import unittest

import generator

GENERATOR_DIR = pathlib.Path(generator.__file__).resolve().parent
REPO_PARENT = str(GENERATOR_DIR.parent)
DEBIAN = "/usr/lib/python3/dist-packages"

LIKE_ANOTHER_PYTHON = f"""
import sys
sys.path[:] = [p for p in sys.path if p != {DEBIAN!r}]
sys.path.insert(0, {REPO_PARENT!r})
"""


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/bin/python3", "-c", LIKE_ANOTHER_PYTHON + code], capture_output=True, text=True,
                          timeout=60)


class LibclangDiscovery(unittest.TestCase):
    def test_debian_bindings_are_found_from_a_python_without_them_on_its_path(self):
        result = run_python(f"""
try:
    import clang
    raise SystemExit("clang importable without Debian's folder: the case tests nothing")
except ImportError:
    pass
from generator import clang_frontend as cf
print(cf.ci.__file__)
print(cf.ci.conf.lib.clang_getClangVersion is not None)
print({DEBIAN!r} in sys.path)
""")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), [f"{DEBIAN}/clang/cindex.py", "True", "False"])

    def test_missing_bindings_say_what_to_install(self):
        result = run_python("""
import importlib.abc

class NoClang(importlib.abc.MetaPathFinder):  # a machine without python3-clang-19 or PyPI's libclang
    def find_spec(self, name, path=None, target=None):
        if name == "clang" or name.startswith("clang."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoClang())
from generator import clang_frontend
""")
        self.assertNotEqual(result.returncode, 0)
        last = result.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("ModuleNotFoundError: python -m generator needs libclang's Python bindings "
                                        "(clang.cindex), which /usr/bin/python3 cannot import"), last)
        self.assertIn("python3-clang-19, libclang1-19", last)
        self.assertIn("`/usr/bin/python3 -m pip install libclang==18.1.1`", last)

    def test_the_command_line_prints_the_advice_without_a_traceback(self):
        result = run_python("""
import generator.__main__ as cli

def extract(args):
    from generator import clang_frontend  # what dump-ir does on a cache miss
    raise AssertionError("clang_frontend imported")

cli.cmd_dump_ir = extract
sys.modules["clang"] = None  # import clang fails
import os
os.path.isfile = lambda path: False  # no Debian bindings either
sys.exit(cli.main(["dump-ir"]))
""")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertTrue(result.stderr.startswith("error: python -m generator needs libclang's Python bindings"),
                        result.stderr)


class RegenerateHelp(unittest.TestCase):
    """tools/regenerate.sh in a copy of the repository whose tools/setup.sh only leaves a mark."""

    def setUp(self):
        self.repo = pathlib.Path(os.environ["TEST_TMPDIR"] if "TEST_TMPDIR" in os.environ else "/tmp") / "repo"
        shutil.rmtree(self.repo, ignore_errors=True)
        (self.repo / "tools").mkdir(parents=True)
        regenerate = pathlib.Path(os.environ.get("REGENERATE_SH", GENERATOR_DIR.parent / "tools" / "regenerate.sh"))
        shutil.copy(regenerate, self.repo / "tools" / "regenerate.sh")
        (self.repo / "tools" / "setup.sh").write_text("touch \"$(dirname \"$0\")/../setup-ran\"\nexit 3\n")
        (self.repo / "generator").symlink_to(GENERATOR_DIR)

    def regenerate(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(self.repo / "tools" / "regenerate.sh"), *args], capture_output=True,
                              text=True, timeout=60)

    def test_help_prints_the_generators_options_and_runs_no_setup(self):
        for flag in ("--help", "-h"):
            result = self.regenerate("--check", flag)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("usage: python -m generator generate", result.stdout)
            self.assertIn("--no-cache", result.stdout)
            self.assertFalse((self.repo / "setup-ran").exists())

    def test_without_help_setup_runs_first(self):
        result = self.regenerate("--check")
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertTrue((self.repo / "setup-ran").exists())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
