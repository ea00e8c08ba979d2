"""Builds ncclbind._nccl, the one C extension of the Python binding, from:
  runtime/src/*.c                the hand-written runtime (loader, errors, versions)
  runtime/src/*.cc               its one C++ file (ncclbind_call_guarded: NCCL EP's C++ exceptions)
  bindings/c/src/*.c             the generated C wrappers nb_* (one slot per function)
  bindings/python/src/generated/*.c  the generated CPython modules
  bindings/python/src/*.c        their hand-written support
All metadata is in pyproject.toml; this file only declares the extension (and the
torch allocator of ncclbind.symmetric, built from its own C file and the runtime), which
pyproject.toml cannot. Build in place for the CPU tests:
  /usr/bin/python3 setup.py build_ext --inplace
NCCLBIND_OLD_GLIBC=1 (tools/build_wheel.sh sets it; x86_64 Linux only) binds the few glibc
symbols whose default version is newer than 2.17 to their old versions (tools/wheel/), so the
wheel qualifies for manylinux_2_17 although it is built on a newer glibc.
"""
import glob
import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


OLD_GLIBC = os.environ.get("NCCLBIND_OLD_GLIBC") == "1"
if OLD_GLIBC and (sys.platform != "linux" or platform.machine() != "x86_64"):
    sys.exit("setup.py: NCCLBIND_OLD_GLIBC=1 is for x86_64 Linux only (its symbol versions are x86_64's)")
OLD_GLIBC_SOURCES = ["tools/wheel/old_glibc_stat.c"] if OLD_GLIBC else []
OLD_GLIBC_COMPILE = ["-include", os.path.join(ROOT, "tools/wheel/old_glibc_symbols.h")] if OLD_GLIBC else []
# libdl.so.2 needed by name: before glibc 2.34 it, not libc, defines dlopen@GLIBC_2.2.5.
OLD_GLIBC_LINK = ["-Wl,--wrap=stat,--wrap=fstat", "-Wl,--no-as-needed", "-l:libdl.so.2"] if OLD_GLIBC else []

class BuildExt(build_ext):
    """The C++ source (runtime/src/foreign_exceptions.cc) is compiled as C++17: -std=c11 of the
    extension's flags is for its C sources, and g++ refuses it."""

    def build_extension(self, ext):
        compile_one = self.compiler._compile

        def compile_source(obj, src, ext_, cc_args, extra_postargs, pp_opts):
            if src.endswith(".cc"):
                extra_postargs = [a for a in extra_postargs if not a.startswith("-std=")] + ["-std=c++17"]
            compile_one(obj, src, ext_, cc_args, extra_postargs, pp_opts)

        self.compiler._compile = compile_source
        try:
            super().build_extension(ext)
        finally:
            self.compiler._compile = compile_one


class BuildPy(build_py):
    """The package, with the device API's generated C-ABI wrappers (bindings/device_wrapper/*.cu) as its
    data in ncclbind/device/_generated/wrapper/, where ncclbind.device.wrapper_table reads them."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "ncclbind", "device", "_generated", "wrapper")
        os.makedirs(target, exist_ok=True)
        for source in sources("bindings/device_wrapper/nccl_device_wrapper-*.cu"):
            self.copy_file(os.path.join(ROOT, source), os.path.join(target, os.path.basename(source)))


extension = Extension(
    "ncclbind._nccl",
    sources=OLD_GLIBC_SOURCES + sources("runtime/src/*.c") + sources("runtime/src/*.cc") + sources("bindings/c/src/*.c") +
    sources("bindings/python/src/*.c") + sources("bindings/python/src/generated/*.c"),
    include_dirs=["runtime/include", "bindings/c/include", "bindings/python/src"],
    depends=sources("runtime/include/ncclbind/*.h") + sources("runtime/src/*.h") +
    sources("bindings/c/include/ncclbind/*.h") + sources("bindings/python/src/*.h") +
    sources("bindings/python/src/generated/*.h"),
    libraries=["dl", "pthread", "stdc++"],
    # Hidden visibility: only PyInit__nccl is exported, so this copy of the runtime
    # never interposes on another binding's in the same process.
    extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-Wall", "-Wno-unused-function",
                        "-Wno-missing-field-initializers"] + OLD_GLIBC_COMPILE,
    extra_link_args=OLD_GLIBC_LINK,
)

# torch's pluggable allocator for ncclbind.torch_pool (not a Python module: torch loads it by
# path and calls its two functions): ncclMemAlloc / ncclMemFree through its own copy of the
# runtime, which uses the libnccl the extension already loaded. Hidden visibility: only the
# functions it marks for torch are exported.
torch_allocator = Extension(
    "ncclbind.symmetric._torch_allocator",
    sources=OLD_GLIBC_SOURCES + ["bindings/python/ncclbind/symmetric/torch_allocator.c"] + sources("runtime/src/*.c"),
    include_dirs=["runtime/include"],
    depends=sources("runtime/include/ncclbind/*.h") + sources("runtime/src/*.h"),
    libraries=["dl", "pthread"],
    extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-Wall"] + OLD_GLIBC_COMPILE,
    extra_link_args=OLD_GLIBC_LINK,
)

setup(ext_modules=[extension, torch_allocator], cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
