"""Offline stand-in for @rules_java//java:defs.bzl: re-exports Bazel's native Java rules.

Needed only because @bazel_tools//tools/jdk (loaded for toolchain registration) loads it.
"""

# getattr: a rule a Bazel version lacks is None here instead of an error at load time.
java_binary = getattr(native, "java_binary", None)
java_import = getattr(native, "java_import", None)
java_library = getattr(native, "java_library", None)
java_lite_proto_library = getattr(native, "java_lite_proto_library", None)
java_package_configuration = getattr(native, "java_package_configuration", None)
java_plugin = getattr(native, "java_plugin", None)
java_proto_library = getattr(native, "java_proto_library", None)
java_runtime = getattr(native, "java_runtime", None)
java_test = getattr(native, "java_test", None)
java_toolchain = getattr(native, "java_toolchain", None)
