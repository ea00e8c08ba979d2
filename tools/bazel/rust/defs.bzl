"""rust_library, rust_binary, rust_test, rust_test_binary and run_rust_test: rustc run directly by Bazel.

The compiler is @ncclbind_rustc//:rustc (repositories.bzl). Dependencies are Rust crates
(rust_library, passed with --extern) or C libraries (anything with CcInfo, such as
cc_library): their static archives and link flags travel with the Rust crates that depend
on them and are linked into each binary and test, inside one --start-group/--end-group so
that their order does not matter.

    load("//tools/bazel/rust:defs.bzl", "rust_library", "rust_test")

    rust_library(
        name = "ncclbind",
        srcs = glob(["src/**/*.rs"]),
        crate_root = "src/lib.rs",
        deps = ["//bindings/c:nccl"],
    )

    # One test program, run once per libnccl of generator/header_sets.toml (tools/bazel/inputs.bzl).
    load("@ncclbind_inputs//:defs.bzl", "LIBRARY_SETS")

    rust_test_binary(name = "errors_bin", srcs = ["errors.rs"], deps = ["//bindings/rust:ncclbind"])

    [run_rust_test(
        name = "errors_test_%s" % hs["id"],
        binary = ":errors_bin",
        env = {"NCCLBIND_NCCL_PATH": "$(rootpath @ncclbind_inputs//:%s_lib)" % hs["id"]},
        data = ["@ncclbind_inputs//:%s_lib" % hs["id"]],
    ) for hs in LIBRARY_SETS if hs["library"] == "nccl"]
"""

RustInfo = provider(
    doc = "A compiled Rust library crate and what linking it needs.",
    fields = {
        "crate_name": "the name other crates use for it (--extern NAME=...)",
        "rlib": "File: the .rlib",
        "transitive_rlibs": "depset of File: this rlib and every rlib it depends on",
        "native_libraries": "depset of File: static archives of C dependencies",
        "link_flags": "depset of string: linker flags of C dependencies (-ldl, ...)",
    },
)

_MODE_FLAGS = {
    "fastbuild": ["-Copt-level=0"],
    "dbg": ["-Copt-level=0", "-Cdebuginfo=2"],
    "opt": ["-Copt-level=3", "-Cdebuginfo=1"],
}

def _crate_name(ctx):
    return ctx.attr.crate_name or ctx.label.name.replace("-", "_")

def _crate_root(ctx):
    if ctx.file.crate_root:
        return ctx.file.crate_root
    if len(ctx.files.srcs) == 1:
        return ctx.files.srcs[0]
    fail("%s: set crate_root: srcs has %d files" % (ctx.label, len(ctx.files.srcs)))

def _archive(library):
    return library.pic_static_library or library.static_library

def _native_dependencies(ctx):
    """(archives, link flags) of the CcInfo deps, dependents before their dependencies."""
    archives, flags = [], []
    for dep in ctx.attr.deps:
        if CcInfo not in dep:
            continue
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            archives += [_archive(lib) for lib in linker_input.libraries if _archive(lib)]
            flags += linker_input.user_link_flags
    return archives, flags

def _dependency_dir(rlib):
    return rlib.dirname

def _dependencies(ctx):
    """The RustInfo of the Rust deps, and the native archives and link flags of the whole tree."""
    rust_deps = [dep[RustInfo] for dep in ctx.attr.deps if RustInfo in dep]
    archives, flags = _native_dependencies(ctx)
    natives = depset(archives, transitive = [dep.native_libraries for dep in rust_deps], order = "topological")
    link_flags = depset(flags, transitive = [dep.link_flags for dep in rust_deps], order = "topological")
    return rust_deps, natives, link_flags

def _run_rustc(ctx, output, flags, rust_deps, link_inputs):
    rlibs = depset(transitive = [dep.transitive_rlibs for dep in rust_deps])
    args = ctx.actions.args()
    args.add(_crate_root(ctx))
    args.add("--crate-name", _crate_name(ctx))
    args.add("--edition", ctx.attr.edition)
    args.add_all(flags)
    args.add("-o", output)
    args.add_all(_MODE_FLAGS.get(ctx.var["COMPILATION_MODE"], []))
    args.add_all(ctx.attr.rustc_flags)
    for dep in rust_deps:
        args.add("--extern", "%s=%s" % (dep.crate_name, dep.rlib.path))
    args.add_all(rlibs, map_each = _dependency_dir, format_each = "-Ldependency=%s", uniquify = True)
    ctx.actions.run(
        executable = ctx.executable._rustc,
        arguments = [args],
        inputs = depset(
            ctx.files.srcs + ctx.files.compile_data + [ctx.file._rustc_version],
            transitive = [rlibs, link_inputs],
        ),
        outputs = [output],
        mnemonic = "Rustc",
        progress_message = "Compiling Rust %s" % ctx.label,
        # rustc runs the system linker, `cc`.
        env = {"PATH": "/bin:/usr/bin:/usr/local/bin"},
    )

def _rust_library_impl(ctx):
    rust_deps, natives, link_flags = _dependencies(ctx)
    rlib = ctx.actions.declare_file("lib%s.rlib" % _crate_name(ctx))
    _run_rustc(ctx, rlib, ["--crate-type=rlib"], rust_deps, depset())
    return [
        DefaultInfo(files = depset([rlib])),
        RustInfo(
            crate_name = _crate_name(ctx),
            rlib = rlib,
            transitive_rlibs = depset([rlib], transitive = [dep.transitive_rlibs for dep in rust_deps]),
            native_libraries = natives,
            link_flags = link_flags,
        ),
    ]

def _link_executable(ctx, is_test):
    """The crate compiled and linked as a program (libtest's harness for a test with harness)."""
    rust_deps, natives, link_flags = _dependencies(ctx)
    executable = ctx.actions.declare_file(ctx.label.name)
    flags = ["--test"] if is_test and ctx.attr.harness else ["--crate-type=bin"]
    flags.append("-Clink-arg=-Wl,--start-group")
    flags += ["-Clink-arg=" + archive.path for archive in natives.to_list()]
    flags.append("-Clink-arg=-Wl,--end-group")
    flags += ["-Clink-arg=" + flag for flag in link_flags.to_list()]
    _run_rustc(ctx, executable, flags, rust_deps, natives)
    return executable, ctx.runfiles(files = ctx.files.data)

def _rust_binary_impl(ctx):
    executable, runfiles = _link_executable(ctx, is_test = False)
    return [DefaultInfo(executable = executable, runfiles = runfiles)]

def _rust_test_impl(ctx):
    executable, runfiles = _link_executable(ctx, is_test = True)
    env = {key: ctx.expand_location(value, ctx.attr.data) for key, value in ctx.attr.env.items()}
    return [
        DefaultInfo(executable = executable, runfiles = runfiles),
        testing.TestEnvironment(env),
    ]

def _rust_test_binary_impl(ctx):
    executable, runfiles = _link_executable(ctx, is_test = True)
    return [DefaultInfo(executable = executable, runfiles = runfiles)]

def _run_rust_test_impl(ctx):
    """Runs the test program of `binary` (a rust_test_binary) under this target's env and data:
    one compile, many runs (e.g. one per libnccl)."""
    executable = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.symlink(output = executable, target_file = ctx.executable.binary, is_executable = True)
    env = {key: ctx.expand_location(value, ctx.attr.data) for key, value in ctx.attr.env.items()}
    runfiles = ctx.runfiles(files = ctx.files.data).merge(ctx.attr.binary[DefaultInfo].default_runfiles)
    return [
        DefaultInfo(executable = executable, runfiles = runfiles),
        testing.TestEnvironment(env),
    ]

_COMMON_ATTRS = {
    "srcs": attr.label_list(allow_files = [".rs"], doc = "Every .rs file of the crate."),
    "crate_root": attr.label(allow_single_file = [".rs"], doc = "Default: the only file in srcs."),
    "crate_name": attr.string(doc = "Default: the target name, with - turned into _."),
    "deps": attr.label_list(providers = [[RustInfo], [CcInfo]], doc = "rust_library or cc_library targets."),
    "edition": attr.string(default = "2021"),
    "rustc_flags": attr.string_list(doc = "Extra rustc arguments."),
    "compile_data": attr.label_list(allow_files = True, doc = "Files the sources include (include_str!, ...)."),
    "_rustc": attr.label(
        default = Label("@ncclbind_rustc//:rustc"),
        allow_single_file = True,
        executable = True,
        cfg = "exec",
    ),
    "_rustc_version": attr.label(default = Label("@ncclbind_rustc//:version.txt"), allow_single_file = True),
}

_EXECUTABLE_ATTRS = dict(_COMMON_ATTRS)
_EXECUTABLE_ATTRS.update({
    "data": attr.label_list(allow_files = True, doc = "Files needed at run time."),
    "harness": attr.bool(default = True, doc = "rust_test: libtest's harness (False: the crate has main)."),
})

_TEST_ATTRS = dict(_EXECUTABLE_ATTRS)
_TEST_ATTRS.update({
    "env": attr.string_dict(doc = "Environment of the test; $(rootpath ...) of data is expanded."),
})

rust_library = rule(
    implementation = _rust_library_impl,
    attrs = _COMMON_ATTRS,
    doc = "A Rust library crate (.rlib).",
)

rust_binary = rule(
    implementation = _rust_binary_impl,
    attrs = _EXECUTABLE_ATTRS,
    executable = True,
    doc = "A Rust program, linked with the static archives of its C dependencies.",
)

rust_test = rule(
    implementation = _rust_test_impl,
    attrs = _TEST_ATTRS,
    test = True,
    doc = "A Rust test: libtest's harness over the crate's #[test]s (or its own main with harness = False).",
)

rust_test_binary = rule(
    implementation = _rust_test_binary_impl,
    attrs = _EXECUTABLE_ATTRS,
    executable = True,
    doc = "A Rust test program (libtest's harness), built once and run by run_rust_test targets.",
)

run_rust_test = rule(
    implementation = _run_rust_test_impl,
    attrs = {
        "binary": attr.label(executable = True, cfg = "target", mandatory = True,
                             doc = "A rust_test_binary target."),
        "data": attr.label_list(allow_files = True, doc = "Files needed at run time."),
        "env": attr.string_dict(doc = "Environment of the test; $(rootpath ...) of data is expanded."),
    },
    test = True,
    doc = "A test that runs a rust_test_binary under its own env and data.",
)
