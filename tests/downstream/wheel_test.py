"""The manylinux wheel, as a user gets it: tools/build_wheel.sh builds and repairs it for the
oldest and the newest CPython 3.10-3.13 found under ~/.pyenv/versions (NCCLBIND_WHEEL_PYTHONS
names others), each is installed into a fresh virtual environment of its Python, and there
`import ncclbind` loads the real libnccl and show_versions() names it.

Skips, saying why, when fewer than two such Pythons exist or the wheel tools are missing
(`bash tools/setup.sh --wheel`, which tools/test.sh runs, installs them)."""
import concurrent.futures
import os
import pathlib
import pwd
import re
import subprocess
import tempfile
import unittest
import zipfile

SUPPORTED = ("3.10", "3.11", "3.12", "3.13")


def pythons() -> list[pathlib.Path]:
    listed = os.environ.get("NCCLBIND_WHEEL_PYTHONS")
    if listed:
        return [pathlib.Path(p) for p in listed.split()]
    versions = pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir) / ".pyenv" / "versions"
    found = {}
    for python in sorted(versions.glob("3.*/bin/python3")):
        minor = ".".join(python.parts[-3].split(".")[:2])
        if minor in SUPPORTED and "t" not in python.parts[-3]:
            found[minor] = python  # the newest patch release of each minor version
    chosen = [found[m] for m in SUPPORTED if m in found]
    return [chosen[0], chosen[-1]] if len(chosen) >= 2 else chosen


def wheel_tools() -> pathlib.Path:
    if os.environ.get("NCCLBIND_WHEEL_TOOLS"):
        return pathlib.Path(os.environ["NCCLBIND_WHEEL_TOOLS"])
    checkout = pathlib.Path("README.md").resolve().parent  # the runfiles link to the source tree
    return checkout / ".cache" / "wheel-tools"


def python_tag(python: pathlib.Path) -> str:
    return subprocess.run([str(python), "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pythons = pythons()
        if len(cls.pythons) < 2:
            raise unittest.SkipTest(f"needs two CPythons of {', '.join(SUPPORTED)} under ~/.pyenv/versions "
                                    f"(or NCCLBIND_WHEEL_PYTHONS); found {[str(p) for p in cls.pythons]}")
        tools = wheel_tools()
        if not (tools / "auditwheel" / "bin" / "auditwheel").exists():
            raise unittest.SkipTest(f"no wheel tools in {tools}: run bash tools/setup.sh --wheel")
        cls.work = pathlib.Path(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")))
        env = dict(os.environ, NCCLBIND_WHEEL_TOOLS=str(tools), TMPDIR=str(cls.work))
        env.pop("PYTHONPATH", None)

        def build(python):
            out = cls.work / python_tag(python)
            return subprocess.run(["bash", "tools/build_wheel.sh", str(python), str(out)], env=env,
                                  capture_output=True, text=True, timeout=600)

        with concurrent.futures.ThreadPoolExecutor(len(cls.pythons)) as pool:
            cls.builds = dict(zip(cls.pythons, pool.map(build, cls.pythons)))

    def wheel(self, python) -> pathlib.Path:
        result = self.builds[python]
        self.assertEqual(result.returncode, 0, result.stderr)
        return pathlib.Path(result.stdout.splitlines()[-1])

    def test_each_wheel_is_tagged_manylinux_2_17_for_its_cpython(self):
        for python in self.pythons:
            with self.subTest(python=str(python)):
                wheel, tag = self.wheel(python), python_tag(python)
                self.assertEqual(wheel.name, f"ncclbind-0.1.0-{tag}-{tag}-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
                with zipfile.ZipFile(wheel) as archive:
                    names = archive.namelist()
                    metadata = archive.read("ncclbind-0.1.0.dist-info/WHEEL").decode()
                self.assertEqual(sorted(re.findall(r"^Tag: (.+)$", metadata, flags=re.M)),
                                 [f"{tag}-{tag}-manylinux2014_x86_64", f"{tag}-{tag}-manylinux_2_17_x86_64"])
                self.assertIn("Root-Is-Purelib: false", metadata)
                self.assertIn(f"ncclbind/_nccl.{'cpython-' + tag[2:]}-x86_64-linux-gnu.so", names)
                self.assertIn("ncclbind/py.typed", names)
                self.assertIn("ncclbind/_nccl.pyi", names)
                # the device layer's data: its IR and wrapper tables, and every release's wrapper source
                wrappers = sorted(p.name for p in pathlib.Path("bindings/device_wrapper").glob("nccl_device_wrapper-*.cu"))
                self.assertTrue(wrappers)
                for name in ["ncclbind/device/_generated/ir.json", "ncclbind/device/_generated/wrapper.json"] + \
                        [f"ncclbind/device/_generated/wrapper/{w}" for w in wrappers]:
                    self.assertIn(name, names)
                # libnccl is loaded at run time, never bundled: auditwheel grafted nothing
                self.assertEqual([n for n in names if ".libs/" in n or "libnccl" in n], [])

    def test_the_extension_needs_nothing_newer_than_glibc_2_17(self):
        for python in self.pythons:
            with self.subTest(python=str(python)):
                self.wheel(python)
                report = " ".join(self.builds[python].stderr.split())
                self.assertIn('consistent with the following platform tag: "manylinux_2_17_x86_64"', report)
                versions = re.search(r"libc\.so\.6 with versions \{([^}]*)\}", report).group(1)
                newest = max(tuple(int(x) for x in v.strip(" '").split("_")[1].split(".")) for v in versions.split(","))
                self.assertLessEqual(newest, (2, 17), versions)

    def test_installed_in_a_fresh_venv_it_loads_the_real_libnccl(self):
        nccl = pathlib.Path(os.environ["NCCLBIND_NCCL_PATH"]).resolve()
        code = int(os.environ["NCCL_VERSION_CODE"])
        version = f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
        check = ("import ncclbind, ncclbind._nccl as ext, sys; from ncclbind.device import cuda_source, wrapper_table; "
                 "assert all(cuda_source.wrapper_source(v).startswith('/* @generated') for v in wrapper_table.HEADER_SETS); "
                 "print(ncclbind.__file__); print(ext.__file__); print(ncclbind.version_code()); ncclbind.show_versions()")
        for python in self.pythons:
            with self.subTest(python=str(python)):
                wheel = self.wheel(python)
                venv = self.work / f"venv-{python_tag(python)}"
                subprocess.run([str(python), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
                # the venv's own Python, driven by its base Python's pip (pip --python)
                subprocess.run([str(python), "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                                "--quiet", "--no-index", "--no-deps", "--disable-pip-version-check", str(wheel)],
                               check=True, capture_output=True, timeout=300)
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                env["NCCLBIND_NCCL_PATH"] = str(nccl)
                result = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", check], cwd=self.work, env=env,
                                        capture_output=True, text=True, timeout=120)
                self.assertEqual(result.returncode, 0, result.stderr)
                package, extension, got, shown = result.stdout.split("\n", 3)
                site = str(venv / "lib")
                self.assertTrue(package.startswith(site) and extension.startswith(site), result.stdout)
                self.assertEqual(int(got), code)
                self.assertRegex(shown, rf"\n  libnccl {re.escape(version)}\b.* @ {re.escape(str(nccl))}\n")
                self.assertRegex(shown, r"\n  libnccl_ep(: absent: .*tried, in order:\n +1\. | [0-9])")


if __name__ == "__main__":
    unittest.main()
