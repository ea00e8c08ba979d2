"""The Rust crate as another project gets it: `cargo package` of bindings/rust, the .crate
unpacked and built alone (its C runtime and generated C inside, every public item of the safe
layer documented: warnings are errors), then docs/install.md's Rust example, run as written: a
crate that vendors the package, built offline and run against a real libnccl (no GPU here:
it prints the version and fails at ncclCommInitRank with NCCL's error)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_examples_test import block, blocks  # noqa: E402  (docs/install.md's section, parsed once)

CARGO = os.path.abspath(os.environ["CARGO"])
# The checkout itself, not the runfiles tree: `cargo package` must resolve csrc/'s symlinks to
# runtime/ and bindings/c/ as it does for a user (the runfiles hold file links only).
CRATE = pathlib.Path(os.path.realpath("bindings/rust/Cargo.toml")).parent
REPO = CRATE.parent.parent


def has_cargo() -> bool:
    return subprocess.run([CARGO, "--version"], capture_output=True).returncode == 0


@unittest.skipUnless(has_cargo(), f"no cargo beside the toolchain's rustc ({CARGO})")
class PackagedCrate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = pathlib.Path(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")))
        # A private CARGO_HOME: nothing from ~/.cargo (no registry, no config) is used.
        cls.env = dict(os.environ, CARGO_HOME=str(cls.work / "cargo_home"), RUSTC=os.path.abspath(os.environ["RUSTC"]),
                       NCCLBIND=str(REPO), NCCLBIND_NCCL_PATH=os.path.abspath(os.environ["NCCLBIND_NCCL_PATH"]))
        cls.env["PATH"] = os.pathsep.join([os.path.dirname(CARGO), cls.env["PATH"]])  # the guide runs `cargo`
        cls.env.pop("CARGO_TARGET_DIR", None)
        cls.env.pop("RUSTFLAGS", None)
        (cls.work / "project" / "src").mkdir(parents=True)

    def cargo(self, *args: str, cwd: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
        result = subprocess.run([CARGO, *args], cwd=cwd, env=dict(self.env, **env), capture_output=True, text=True,
                                timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def package(self) -> pathlib.Path:
        target = self.work / "package_target"
        if not target.exists():
            self.cargo("package", "--manifest-path", str(CRATE / "Cargo.toml"), "--allow-dirty", "--no-verify",
                       "--offline", "--target-dir", str(target), cwd=self.work)
        (crate,) = (target / "package").glob("ncclbind-*.crate")
        return crate

    def test_the_package_holds_the_c_sources_and_no_path_outside(self):
        with tarfile.open(self.package()) as tar:
            names = {name.split("/", 1)[1] for name in tar.getnames()}
            self.assertFalse([m.name for m in tar.getmembers() if not m.isfile()], "only plain files")
        expected_c = {f"csrc/runtime/{p.relative_to(REPO / 'runtime')}" for pattern in ("*/**/*.[ch]", "*/**/*.cc")
                      for p in (REPO / "runtime").glob(pattern)}
        expected_c |= {f"csrc/c/{p.relative_to(REPO / 'bindings/c')}" for p in (REPO / "bindings/c").glob("[is]*/**/*.[ch]")}
        self.assertIn("csrc/runtime/src/loader.c", expected_c)
        self.assertIn("csrc/runtime/src/foreign_exceptions.cc", expected_c)  # NCCL EP's C++ exceptions
        self.assertIn("csrc/c/include/ncclbind/nccl.h", expected_c)
        self.assertEqual({n for n in names if n.startswith("csrc/")}, expected_c)
        self.assertTrue({"Cargo.toml", "build.rs", "src/lib.rs", "src/generated/sys/nccl.rs", "README.md"} <= names)

    def unpacked(self, name: str) -> pathlib.Path:
        """The packaged crate, unpacked alone under work/name: its root."""
        with tarfile.open(self.package()) as tar:
            tar.extractall(self.work / name)
        (root,) = (self.work / name).iterdir()
        return root

    def test_clippy_finds_nothing_in_the_package(self):
        """cargo clippy over the crate as packaged, every target, warnings as errors."""
        clippy = pathlib.Path(CARGO).parent / "cargo-clippy"  # @ncclbind_rustc's, beside its cargo
        self.assertTrue(clippy.exists(), f"no cargo-clippy beside {CARGO}: rustup component add clippy")
        self.cargo("clippy", "--offline", "--all-targets", "--", "-D", "warnings", cwd=self.unpacked("clippy"))

    def test_the_package_builds_alone_offline_with_every_public_item_documented(self):
        root = self.unpacked("alone")
        manifest = (root / "Cargo.toml").read_text()
        self.assertNotIn("../", manifest, "a target path outside the package")
        # -D warnings: the crate's #![warn(missing_docs)] (and any other warning) fails the build.
        result = self.cargo("rustc", "--lib", "--offline", "--", "-D", "warnings", cwd=root)
        self.assertNotIn("warning", result.stderr)

    def test_the_readme_example_vendors_the_package_and_reports_nccls_failure(self):
        project = self.work / "project"
        (project / "Cargo.toml").write_text(block("toml"))
        (project / "src" / "main.rs").write_text(block("rust"))
        result = subprocess.run(["bash", "-c", blocks("sh")[1]], cwd=project, env=self.env, capture_output=True,
                                text=True, timeout=600)
        code = int(os.environ["NCCL_VERSION_CODE"])
        version = f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
        loaded = os.path.realpath(self.env["NCCLBIND_NCCL_PATH"])  # the runtime names the file it loaded
        self.assertEqual(result.stdout, f"NCCL {version} from {loaded}\n", result.stderr)
        self.assertEqual(result.returncode, 1, result.stderr)
        # No GPU: NCCL's own error, named and explained (e.g. ncclUnhandledCudaError, "Cuda failure ...").
        self.assertRegex(result.stderr, r'Error: Nccl \{ function: "ncclCommInitRank", code: [1-9][0-9]*, '
                                        r'name: "(ncclUnhandledCudaError|ncclSystemError|ncclInternalError|'
                                        r'ncclInvalidUsage)", description: "[^"]+", nccl_message: "[^"]{10,}"')
        vendored = project / "vendor" / re.sub(r"\.crate$", "", self.package().name)
        self.assertTrue((vendored / "csrc/runtime/src/loader.c").is_file())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
