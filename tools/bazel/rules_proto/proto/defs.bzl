"""Offline stand-in for @rules_proto//proto:defs.bzl: re-exports Bazel's native proto rules."""

load(":builtins.bzl", "builtin_proto_info")

# getattr: a rule a Bazel version lacks is None here instead of an error at load time.
proto_lang_toolchain = getattr(native, "proto_lang_toolchain", None)
proto_library = getattr(native, "proto_library", None)
ProtoInfo = builtin_proto_info
