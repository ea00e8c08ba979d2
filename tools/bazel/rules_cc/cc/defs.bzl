"""Offline stand-in for @rules_cc//cc:defs.bzl: re-exports Bazel's native C++ rules.

Bazel 4.2.3 (Debian's bazel-bootstrap) would otherwise download rules_cc. BUILD files
load from here exactly as they would from the real rules_cc, so a newer Bazel that uses
the real rule set works unchanged.
"""

# getattr: a rule a Bazel version lacks is None here instead of an error at load time.
cc_binary = getattr(native, "cc_binary", None)
cc_import = getattr(native, "cc_import", None)
cc_library = getattr(native, "cc_library", None)
cc_proto_library = getattr(native, "cc_proto_library", None)
cc_test = getattr(native, "cc_test", None)
cc_toolchain = getattr(native, "cc_toolchain", None)
cc_toolchain_suite = getattr(native, "cc_toolchain_suite", None)
fdo_prefetch_hints = getattr(native, "fdo_prefetch_hints", None)
fdo_profile = getattr(native, "fdo_profile", None)
objc_import = getattr(native, "objc_import", None)
objc_library = getattr(native, "objc_library", None)
