"""ncclbind_dependencies(): what @ncclbind's BUILD files need, declared offline.

For another workspace (Bazel 4.2.3 as Debian ships it, no network):

    local_repository(name = "ncclbind", path = "/path/to/ncclbind")

    load("@ncclbind//tools/bazel:dependencies.bzl", "ncclbind_dependencies")

    ncclbind_dependencies()

and `build --nosandbox_debug` in that workspace's .bazelrc (Debian's /etc/bazel/bazelrc turns
it on). ncclbind's own WORKSPACE calls it too. A repository the workspace already declares
(its own rules_cc, say) is left as it is. It declares:
  rules_cc, rules_java, rules_proto, rules_python, remote_coverage_tools
      the stand-ins in tools/bazel/ (Bazel's native rules re-exported), which Bazel 4.2.3
      would otherwise download
  ncclbind_rustc    the machine's rustc (tools/bazel/rust/repositories.bzl), for rust_library
  python_headers    CPython's headers from Debian's python3-dev, for the extension
and registers the toolchain that runs py_binary/py_test with /usr/bin/python3 (Debian's,
which has the generator's clang.cindex and jinja2); register_python_toolchain = False leaves
the workspace's own Python toolchain alone.
"""

load("//tools/bazel/rust:repositories.bzl", "local_rustc")

_STUBS = ["rules_cc", "rules_java", "rules_proto", "rules_python", "remote_coverage_tools"]

def _stub_repository_impl(rctx):
    # The folder beside this file's package, wherever ncclbind is checked out.
    stub = rctx.path(Label("//tools/bazel:BUILD")).dirname.get_child(rctx.attr.directory)
    for child in stub.readdir():
        rctx.symlink(child, child.basename)

_stub_repository = repository_rule(
    implementation = _stub_repository_impl,
    attrs = {"directory": attr.string(doc = "The stand-in's folder in tools/bazel/.")},
    doc = "One of ncclbind's offline stand-ins (tools/bazel/<directory>), as a repository.",
)

def ncclbind_dependencies(register_python_toolchain = True):
    """Declares the repositories @ncclbind needs (see the module docstring); call it once in WORKSPACE."""
    for name in _STUBS:
        if not native.existing_rule(name):
            _stub_repository(name = name, directory = name)
    if not native.existing_rule("ncclbind_rustc"):
        local_rustc(name = "ncclbind_rustc")
    if not native.existing_rule("python_headers"):
        native.new_local_repository(
            name = "python_headers",
            build_file_content = """
cc_library(
    name = "python_headers",
    hdrs = glob(["python3.11/**/*.h", "x86_64-linux-gnu/python3.11/**/*.h"]),
    includes = [".", "python3.11"],
    visibility = ["//visibility:public"],
)""",
            path = "/usr/include",
        )
    if register_python_toolchain:
        native.register_toolchains(str(Label("//tools/bazel:python_toolchain")))
