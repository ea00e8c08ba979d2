"""Bazel's built-in Python providers under other names, for defs.bzl to re-export."""

builtin_py_info = PyInfo
builtin_py_runtime_info = PyRuntimeInfo
