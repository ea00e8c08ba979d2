"""Every Rust file of the repository (the crate's sources, generated ones included, its tests,
benchmarks and GPU programs: the data of this target) is rustfmt-clean: `rustfmt --check
--edition 2021` over each, with the toolchain's rustfmt (@ncclbind_rustc), given as argv[1].
A file that is not prints rustfmt's diff and fails the test; `rustfmt --edition 2021 FILE`
fixes it."""
import os
import pathlib
import subprocess
import sys
import unittest

RUSTFMT = sys.argv.pop(1) if len(sys.argv) > 1 else "rustfmt"


def rust_files() -> list[pathlib.Path]:
    """The .rs files among this target's runfiles (the repository's, not the toolchain's): Bazel's
    runfiles tree of this workspace, which holds the data and nothing else."""
    root = pathlib.Path(os.environ["TEST_SRCDIR"]) / os.environ["TEST_WORKSPACE"]
    return sorted(p for p in root.rglob("*.rs") if "external" not in p.relative_to(root).parts)


class RustfmtTest(unittest.TestCase):
    def test_every_rust_file_is_rustfmt_clean(self):
        files = rust_files()
        # the crate's sources, generated ones, tests, benchmarks and GPU programs are all there
        for part in ("bindings/rust/src/lib.rs", "bindings/rust/src/generated/sys/nccl.rs", "tests/rust/abort.rs",
                     "tests/multigpu/rust/ranks.rs", "bench/rust/trivial_call.rs", "bench/cli/rust/main.rs"):
            self.assertTrue(any(str(p).endswith(part) for p in files), f"{part} is not among the files checked")
        run = subprocess.run([RUSTFMT, "--check", "--edition", "2021", *map(str, files)],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, f"rustfmt --check over {len(files)} files:\n"
                         f"{run.stdout[-6000:]}{run.stderr[-2000:]}")
        print(f"rustfmt --check: {len(files)} files clean")


if __name__ == "__main__":
    unittest.main()
