"""Bazel's built-in proto provider under another name, for defs.bzl to re-export."""

builtin_proto_info = ProtoInfo
