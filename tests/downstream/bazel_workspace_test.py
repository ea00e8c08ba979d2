"""Another Bazel workspace that uses ncclbind (tests/downstream/bazel_workspace: a
local_repository, the load of ncclbind_dependencies() and its call, --nosandbox_debug) builds
offline with its own Bazel server, and what it built runs: the C binding, the Python extension,
the Rust crate and the generator. docs/install.md's Bazel example is that workspace's files."""
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_examples_test import block  # noqa: E402

# The checkout itself: the workspace names ncclbind as "../../.." (the runfiles hold file links only).
WORKSPACE = pathlib.Path(os.path.realpath("tests/downstream/bazel_workspace/WORKSPACE")).parent
BAZEL = "/usr/bin/bazel"


class DownstreamWorkspace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tmp = pathlib.Path(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")))
        # Its own server and output tree under the test's tmp; nothing is written into the checkout
        # (--symlink_prefix=/: no bazel-* links); sandboxes do not nest, so actions run standalone.
        cls.startup = [BAZEL, f"--output_user_root={tmp / 'root'}", "--max_idle_secs=60", "--nohome_rc"]
        cls.env = {key: value for key, value in os.environ.items() if not key.startswith(("TEST_", "RUNFILES"))}
        cls.build = cls.bazel("build", "--symlink_prefix=/", "--spawn_strategy=standalone",
                              "--experimental_repository_disable_download", "//...")
        cls.bin = pathlib.Path(cls.bazel("info", "--symlink_prefix=/", "bazel-bin").stdout.strip())

    @classmethod
    def tearDownClass(cls):
        subprocess.run([*cls.startup, "shutdown"], cwd=WORKSPACE, env=cls.env, capture_output=True, timeout=60)

    @classmethod
    def bazel(cls, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cls.startup, *args], cwd=WORKSPACE, env=cls.env, capture_output=True, text=True,
                              timeout=900)

    def run_built(self, name: str, *args: str) -> subprocess.CompletedProcess:
        env = dict(self.env, NCCLBIND_NCCL_PATH=os.path.abspath(os.environ["NCCLBIND_NCCL_PATH"]))
        return subprocess.run([str(self.bin / name), *args], env=env, capture_output=True, text=True, timeout=60)

    def version(self) -> str:
        code = int(os.environ["NCCL_VERSION_CODE"])
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"

    def test_it_builds_offline(self):
        self.assertEqual(self.build.returncode, 0, self.build.stderr[-4000:])

    def test_the_c_binding_reaches_libnccl(self):
        result = self.run_built("version_c")
        self.assertEqual((result.returncode, result.stdout), (0, f"NCCL {os.environ['NCCL_VERSION_CODE']}\n"),
                         result.stderr)

    def test_the_python_extension_reaches_libnccl(self):
        result = self.run_built("version_py")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"\n  libnccl {self.version()}", result.stdout)

    def test_the_rust_crate_reaches_libnccl(self):
        result = self.run_built("version_rs")
        self.assertEqual((result.returncode, result.stdout), (0, f"NCCL {self.version()}\n"), result.stderr)

    def test_the_generator_runs_as_a_tool(self):
        result = self.run_built("generator", "--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"usage: python -m generator \[-h\]\s+\{dump-ir,generate,coverage,")

    def test_the_readme_shows_the_workspace_and_build_files_as_they_are(self):
        self.assertEqual(block("bzl"), (WORKSPACE / "WORKSPACE").read_text())
        build = (WORKSPACE / "BUILD").read_text()
        starlark = block("starlark")
        self.assertIn(starlark, build)
        self.assertRegex(starlark, re.compile(r"^cc_binary\(", re.M))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
