#!/usr/bin/env python3
"""Fetch the pinned wheels named in generator/header_sets.toml and unpack their
headers and libraries into .cache/header_sets/<name>/{include,lib}; and the reference
wheels of tests/conformance/reference_wheels.toml (nccl4py, nccl-extensions), of which only
the Python sources are kept, in .cache/api_reference/<name>/.

Idempotent: a set whose stamp matches its wheel pin is left alone. The CUDA
toolkit's set and `directory` sets are not copied; they are read in place. Of an NCCL wheel
only the headers and the one shared library (the set's soname) are kept: the wheel is deleted
once unpacked, so that a fresh machine's disk holds what the tests read and no more.
"""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("NCCLBIND_CACHE", REPO / ".cache"))
# Explicit platform tags so every machine downloads the same files. Wheels of different
# releases carry different manylinux tags (nvidia-nccl-cu12 2.19.3: manylinux1, 2.20-2.27:
# manylinux2014; nvidia-nccl-cu13 2.28.x-2.31.x: manylinux_2_18, 2.32.3: manylinux_2_27), and pip
# given --platform accepts only the tags it is given, so it gets every glibc tag from 2_28 down to
# 2_5 (and the manylinux2014/2010/1 aliases), newest first: pip takes the first tag in this fixed
# order that a release has.
PLATFORM_TAGS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)] + \
    ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
PIP_PLATFORM = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                *(arg for tag in PLATFORM_TAGS for arg in ("--platform", tag))]


def load_sets():
    """The [[header_set]] tables, checked against the generator's schema (a misspelled or
    missing key stops here, naming its line, instead of failing later as a KeyError)."""
    sys.path.insert(0, str(REPO))
    from generator.header_sets import read_header_set_tables
    return read_header_set_tables(REPO / "generator" / "header_sets.toml")


def fetch_wheel(spec: str, dest: Path) -> Path:
    name, version = spec.split("==")
    norm = name.replace("-", "_")
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"{norm}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", *PIP_PLATFORM,
                        "-d", str(dest), spec], check=True)
        found = sorted(dest.glob(f"{norm}-{version}-*.whl"))
    if not found:
        sys.exit(f"fetch_inputs: pip downloaded nothing matching {spec}")
    return found[0]


def unpack(wheel: Path, prefix: str, out: Path, suffix: str | tuple = "", names: tuple = ()):
    """The files of `wheel` under `prefix` that end in `suffix` or are named one of `names`, into `out`."""
    prefix = prefix.rstrip("/") + "/"
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if not info.filename.startswith(prefix) or info.is_dir():
                continue
            base = info.filename.rsplit("/", 1)[-1]
            if not (base in names or (suffix and base.endswith(suffix))):
                continue
            target = out / info.filename[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            n += 1
    if n == 0:
        sys.exit(f"fetch_inputs: {wheel.name} holds nothing under {prefix}")


def reference_pins() -> list[dict]:
    import tomllib
    return tomllib.loads((REPO / "tests" / "conformance" / "reference_wheels.toml").read_text())["wheel"]


def main():
    keep_wheels = {entry["pin"] for entry in reference_pins()}  # unpacked again by fetch_api_references
    for hs in load_sets():
        if hs["source"] != "wheel":
            continue
        out = CACHE / "header_sets" / hs["name"]
        stamp = out / ".stamp"
        if stamp.exists() and stamp.read_text() == hs["wheel"]:
            continue
        if out.exists():
            shutil.rmtree(out)
        wheel = fetch_wheel(hs["wheel"], CACHE / "wheels")
        # the headers (and their folders: nccl_device/, nccl_ep/); the library the set loads, and
        # the device API's link inputs where the release ships them (libnccl_device.bc, .ltoir)
        unpack(wheel, hs["wheel_include"], out / "include", suffix=(".h", ".hpp", ".cuh"))
        unpack(wheel, hs["wheel_lib"], out / "lib", suffix=(".bc", ".ltoir"), names=(hs["soname"],))
        stamp.write_text(hs["wheel"])
        print(f"fetch_inputs: {hs['name']} <- {wheel.name} ({wheel.stat().st_size >> 20} MiB; "
              f"kept {sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) >> 20} MiB)")
        if hs["wheel"] not in keep_wheels:
            wheel.unlink()
    fetch_api_references()


def fetch_api_references():
    """The reference wheels' Python sources, kept under their package path
    (.cache/api_reference/nccl4py-0.6.0/nccl/core/...). The wheels themselves stay in
    .cache/wheels; only the .py files are unpacked."""
    for wheel_entry in reference_pins():
        pin, keep = wheel_entry["pin"], wheel_entry["keep"].strip("/")
        out = CACHE / "api_reference" / pin.replace("==", "-")
        stamp = out / ".stamp"
        if stamp.exists() and stamp.read_text() == f"{pin} {keep}":
            continue
        if out.exists():
            shutil.rmtree(out)
        wheel = fetch_wheel(pin, CACHE / "wheels")
        unpack(wheel, keep, out / keep, suffix=".py")
        # the packages above `keep` (nccl/__init__.py), so that `keep` reads as a package
        parts = keep.split("/")
        for depth in range(1, len(parts)):
            (out.joinpath(*parts[:depth]) / "__init__.py").touch()
        stamp.write_text(f"{pin} {keep}")
        print(f"fetch_inputs: api_reference {pin} <- {wheel.name}")


if __name__ == "__main__":
    main()
