"""Builds ncclbind._nccl, the one C extension of the Python binding, from:
  runtime/src/*.c                the hand-written runtime (loader, errors, versions)
  bindings/c/src/*.c             the generated C wrappers nb_* (one slot per function)
  bindings/python/src/generated/*.c  the generated CPython modules
  bindings/python/src/*.c        their hand-written support
All metadata is in pyproject.toml; this file only declares the extension, which
pyproject.toml cannot. Build in place for the CPU tests:
  /usr/bin/python3 setup.py build_ext --inplace
"""
import glob
import os

from setuptools import Extension, setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


extension = Extension(
    "ncclbind._nccl",
    sources=sources("runtime/src/*.c") + sources("bindings/c/src/*.c") + sources("bindings/python/src/*.c") +
    sources("bindings/python/src/generated/*.c"),
    include_dirs=["runtime/include", "bindings/c/include", "bindings/python/src"],
    depends=sources("runtime/include/ncclbind/*.h") + sources("runtime/src/*.h") +
    sources("bindings/c/include/ncclbind/*.h") + sources("bindings/python/src/*.h"),
    libraries=["dl", "pthread"],
    # Hidden visibility: only PyInit__nccl is exported, so this copy of the runtime
    # never interposes on another binding's in the same process.
    extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-Wall", "-Wno-unused-function",
                        "-Wno-missing-field-initializers"],
)

setup(ext_modules=[extension])
