"""Offline stand-in for @rules_python//python:defs.bzl: re-exports Bazel's native Python rules.

Load py_* rules from here (load("@rules_python//python:defs.bzl", "py_test")) so a newer
Bazel with the real rules_python works unchanged.
"""

load("@bazel_tools//tools/python:toolchain.bzl", _py_runtime_pair = "py_runtime_pair")
load(":builtins.bzl", "builtin_py_info", "builtin_py_runtime_info")

# getattr: a rule a Bazel version lacks is None here instead of an error at load time.
py_binary = getattr(native, "py_binary", None)
py_library = getattr(native, "py_library", None)
py_runtime = getattr(native, "py_runtime", None)
py_runtime_pair = _py_runtime_pair
py_test = getattr(native, "py_test", None)
PyInfo = builtin_py_info
PyRuntimeInfo = builtin_py_runtime_info
