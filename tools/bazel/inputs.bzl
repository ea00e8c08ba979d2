"""The @ncclbind_inputs repository: the real NCCL headers and libraries, by symlink.

Nothing is copied into git or into Bazel's output base. The repository holds symlinks to
  * $CUDA_HOME/include (default /usr/local/cuda): the CUDA headers, and the toolkit's own
    NCCL headers (the `cuda_toolkit` header set, e.g. nccl-2.28.9);
  * $CUDA_HOME/lib64 (or lib): the toolkit's libnccl.so.2, and stubs/libcuda.so;
  * <workspace>/.cache/header_sets/<name>/{include,lib}: the wheel header sets that
    tools/fetch_inputs.py unpacks (run tools/setup.sh);
  * <path>/{include,lib} of a `directory` header set (unreleased headers), in place.

The header sets come from generator/header_sets.toml, read by tools/bazel/header_sets_json.py
with /usr/bin/python3 (Starlark has no TOML parser). Editing the TOML, re-running
fetch_inputs.py (its .stamp files) or changing CUDA_HOME re-runs this rule.

Layout of the generated repository (paths relative to its root):
  cuda/include/...              CUDA headers, minus the toolkit's nccl* files
  cuda/stubs/libcuda.so.1       $CUDA_HOME/lib64/stubs/libcuda.so under its soname
  sets/<name>/include/...       one NCCL header set, alone on its include path
  sets/<name>/lib/<soname>      its library
  header_sets.json              the above per set, for tests that read files at run time
  api_reference/<wheel>/...     <workspace>/.cache/api_reference: the Python sources of the
                                reference wheels (tests/conformance/reference_wheels.toml)
  defs.bzl                      HEADER_SETS, a list of dicts, for BUILD-file loops

Targets (the id of a set is its name with '-' and '.' turned into '_', e.g. nccl_2_28_9):
  :<id>_headers   cc_library: the set's headers plus those it includes (CUDA headers and,
                  for a set with depends_on, that set's headers: nccl_ep.h's <nccl.h> is
                  nccl-2.32.3's)
  :<id>_hdrs      filegroup: the same files, for data = [...] of tests that parse headers
  :<id>_lib       filegroup: the set's one shared library (use $(rootpath ...))
  :cuda_headers / :cuda_hdrs   the CUDA headers alone (cccl/ is left out)
  :cuda_stub_lib  filegroup: the CUDA driver stub, named libcuda.so.1
  :header_sets_json           filegroup: header_sets.json
  :api_reference              filegroup: the reference wheels' Python sources
  :all_inputs     filegroup: everything above
"""

_PYTHON = "/usr/bin/python3"

_SETUP_HINT = "Run tools/setup.sh (it installs the Debian packages and runs tools/fetch_inputs.py)."

def _target_id(name):
    return name.replace("-", "_").replace(".", "_")

def _fail(msg):
    fail("\n@ncclbind_inputs: %s\n%s\n" % (msg, _SETUP_HINT))

def _watch(rctx, relpath):
    """Reads a workspace file through a label so that changing it re-runs this rule."""
    rctx.read(rctx.path(Label("@//:" + relpath)))

def _lib_dir(rctx, cuda_home):
    for d in ("lib64", "lib"):
        p = rctx.path(cuda_home + "/" + d)
        if p.exists:
            return p
    _fail("%s has neither lib64/ nor lib/ (CUDA_HOME=%s)" % (cuda_home, cuda_home))

def _header_sets(rctx, workspace):
    toml = workspace.get_child("generator").get_child("header_sets.toml")
    if not toml.exists:
        _fail("%s is missing" % toml)
    _watch(rctx, "generator/header_sets.toml")
    _watch(rctx, "generator/header_sets.py")
    script = rctx.path(Label("//tools/bazel:header_sets_json.py"))
    res = rctx.execute([_PYTHON, str(script), str(toml)], quiet = True)
    if res.return_code != 0:
        _fail("%s %s %s failed:\n%s" % (_PYTHON, script, toml, res.stderr))
    sets = json.decode(res.stdout)
    for hs in sets:
        if hs["ir"]:  # a regeneration that changes a set's capabilities re-runs this rule
            _watch(rctx, hs["ir"])
    return sets

def _glob(pattern_dir, exclude = []):
    return "glob([%r], exclude = %r)" % (pattern_dir + "/**", exclude)

def _version_code(hs):
    """NCCL's code for the version (NCCL_VERSION_CODE): X*1000+Y*100+Z before NCCL 2.9."""
    major, minor, patch = [int(x) for x in hs["version"].split(".")]
    if hs["library"] == "nccl" and major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch

def _include_dirs(hs, by_name):
    """Include directories in search order: the set, the sets it depends on, CUDA."""
    out = []
    for _ in range(len(by_name)):  # Starlark has no recursion or while loops.
        out.append("sets/%s/include" % hs["name"])
        if not hs.get("depends_on"):
            break
        hs = by_name[hs["depends_on"]]
    return out + ["cuda/include"]

def _ncclbind_inputs_impl(rctx):
    cuda_home = rctx.os.environ.get("CUDA_HOME", "") or "/usr/local/cuda"
    workspace = rctx.path(Label("@//:WORKSPACE")).dirname
    cache_env = rctx.os.environ.get("NCCLBIND_CACHE", "")
    cache = rctx.path(cache_env) if cache_env else workspace.get_child(".cache")

    cuda_include = rctx.path(cuda_home + "/include")
    if not cuda_include.get_child("cuda_runtime.h").exists:
        _fail("no CUDA toolkit: %s/include/cuda_runtime.h does not exist (set CUDA_HOME)" % cuda_home)
    cuda_lib = _lib_dir(rctx, cuda_home)

    # CUDA headers, without the toolkit's NCCL, so that each NCCL header set is the only
    # <nccl.h> on its include path.
    toolkit_nccl = []
    for entry in cuda_include.readdir():
        if entry.basename.startswith("nccl"):
            toolkit_nccl.append(entry)
        else:
            rctx.symlink(entry, "cuda/include/" + entry.basename)
    stub = cuda_lib.get_child("stubs").get_child("libcuda.so")
    if not stub.exists:
        _fail("%s does not exist" % stub)
    rctx.symlink(stub, "cuda/stubs/libcuda.so.1")

    sets = _header_sets(rctx, workspace)
    by_name = {hs["name"]: hs for hs in sets}
    described = []
    for hs in sets:
        name = hs["name"]
        inc = "sets/%s/include" % name
        lib = "sets/%s/lib/%s" % (name, hs["soname"])
        if hs["source"] == "cuda_toolkit":
            for entry in toolkit_nccl:
                rctx.symlink(entry, "%s/%s" % (inc, entry.basename))
            so = cuda_lib.get_child(hs["soname"])
            if not so.exists:
                _fail("header set %s: %s does not exist (CUDA_HOME=%s)" % (name, so, cuda_home))
            rctx.symlink(so, lib)
        elif hs["source"] == "wheel":
            d = cache.get_child("header_sets").get_child(name)
            stamp = d.get_child(".stamp")
            if not stamp.exists:
                _fail("header set %s is not unpacked: %s does not exist" % (name, stamp))
            if rctx.read(stamp) != hs["wheel"]:
                _fail("header set %s in %s is stale (want %s)" % (name, d, hs["wheel"]))
            if not cache_env:
                _watch(rctx, ".cache/header_sets/%s/.stamp" % name)
            rctx.symlink(d.get_child("include"), inc)
            rctx.symlink(d.get_child("lib"), "sets/%s/lib" % name)
            if not d.get_child("lib").get_child(hs["soname"]).exists:
                _fail("header set %s: %s/lib/%s does not exist" % (name, d, hs["soname"]))
        elif hs["source"] == "directory":
            # Read in place, like the toolkit; `path` is relative to the workspace.
            # Its lib/ is optional: headers no release has yet may have no build. Such a set is
            # generated, compiled and checked as any other, and no test loads its library.
            d = rctx.path(hs["path"] if hs["path"].startswith("/") else "%s/%s" % (workspace, hs["path"]))
            if not d.get_child("include").exists:
                _fail("header set %s: %s/include does not exist (path = %r)" % (name, d, hs["path"]))
            rctx.symlink(d.get_child("include"), inc)
            if d.get_child("lib").get_child(hs["soname"]).exists:
                rctx.symlink(d.get_child("lib"), "sets/%s/lib" % name)
            else:
                lib = None
        else:
            _fail("header set %s: unknown source %r in generator/header_sets.toml" % (name, hs["source"]))
        for h in hs["headers"]:
            if not rctx.path(inc + "/" + h).exists:
                _fail("header set %s: %s/%s does not exist" % (name, inc, h))
        dep = hs.get("depends_on")
        if dep and dep not in by_name:
            _fail("header set %s depends_on unknown set %s" % (name, dep))
        described.append((hs, inc, lib))

    api_reference = cache.get_child("api_reference")
    if not api_reference.exists:
        _fail("%s does not exist (the reference wheels of tests/conformance/reference_wheels.toml)" % api_reference)
    _watch(rctx, "tests/conformance/reference_wheels.toml")
    rctx.symlink(api_reference, "api_reference")

    build = [
        "# Generated by //tools/bazel:inputs.bzl. Do not edit.",
        'package(default_visibility = ["//visibility:public"])',
        "",
        'exports_files(["header_sets.json", "defs.bzl"])',
        "",
        "CUDA_HDRS = " + _glob("cuda/include", ["cuda/include/cccl/**"]),
        "",
        "cc_library(",
        '    name = "cuda_headers",',
        "    hdrs = CUDA_HDRS,",
        '    includes = ["cuda/include"],',
        ")",
        "",
        'filegroup(name = "cuda_hdrs", srcs = CUDA_HDRS)',
        "",
        'filegroup(name = "cuda_stub_lib", srcs = ["cuda/stubs/libcuda.so.1"])',
        "",
        'filegroup(name = "header_sets_json", srcs = ["header_sets.json"])',
        "",
        'filegroup(name = "api_reference", srcs = glob(["api_reference/**/*.py"]))',
        "",
    ]
    entries = []
    all_inputs = [":header_sets_json", ":cuda_hdrs", ":cuda_stub_lib"]
    for hs, inc, lib in described:
        tid = _target_id(hs["name"])
        dep = hs.get("depends_on")
        dep_ids = [_target_id(dep)] if dep else []
        build += [
            "# header set %s (%s %s, from %s)" % (hs["name"], hs["library"], hs["version"], hs["source"]),
            "cc_library(",
            '    name = "%s_headers",' % tid,
            "    hdrs = %s," % _glob(inc),
            "    includes = [%r]," % inc,
            "    deps = %r," % ([":%s_headers" % d for d in dep_ids] + [":cuda_headers"]),
            ")",
            "",
            "filegroup(",
            '    name = "%s_hdrs",' % tid,
            "    srcs = %s + %r," % (_glob(inc), [":%s_hdrs" % d for d in dep_ids] + [":cuda_hdrs"]),
            ")",
            "",
            'filegroup(name = "%s_lib", srcs = %r)' % (tid, [lib] if lib else []),
            "",
        ]
        all_inputs += [":%s_hdrs" % tid] + ([":%s_lib" % tid] if lib else [])
        entry = {
            "name": hs["name"],
            "id": tid,
            "library": hs["library"],
            "version": hs["version"],
            "version_code": _version_code(hs),
            "headers": hs["headers"],
            "device_headers": hs["device_headers"],
            "capabilities": hs["capabilities"],
            "cuda_variant": hs["cuda_variant"],
            "soname": hs["soname"],
            "depends_on": dep or None,
            "include_dirs": _include_dirs(hs, by_name),
            "lib": lib,
            "has_library": lib != None,
        }
        entries.append(entry)
    build += [
        "filegroup(",
        '    name = "all_inputs",',
        "    srcs = %r," % all_inputs,
        ")",
        "",
    ]
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name, executable = False)
    rctx.file("BUILD", "\n".join(build), executable = False)
    rctx.file("header_sets.json", json.encode_indent({
        "comment": "Paths are relative to this file's directory. Generated from generator/header_sets.toml by //tools/bazel:inputs.bzl.",
        "cuda_home": cuda_home,
        "cuda_include_dir": "cuda/include",
        "cuda_stub_lib": "cuda/stubs/libcuda.so.1",
        "header_sets": entries,
    }, indent = "  ") + "\n", executable = False)
    rctx.file("defs.bzl", "\n".join([
        '"""Generated by //tools/bazel:inputs.bzl from generator/header_sets.toml."""',
        "",
        "CUDA_HOME = %r" % cuda_home,
        "",
        "# One dict per header set, in the TOML's order (oldest first per library): name, id",
        "# (target prefix), library, version, version_code, headers, device_headers (None: no",
        "# device API), capabilities (the set's IR's: filter on these, e.g. \"device_api\"),",
        "# cuda_variant (\"cu12\", \"cu13\": the CUDA release the library is built for; None if unknown),",
        "# soname, depends_on, include_dirs and lib (paths inside @ncclbind_inputs), has_library",
        "# (False for a directory set of headers without a build: its :<id>_lib is empty).",
        "HEADER_SETS = [",
    ] + ["    %r," % e for e in entries] + [
        "]",
        "",
        "# The sets whose library the tests load (every set but a directory set without lib/).",
        "LIBRARY_SETS = [hs for hs in HEADER_SETS if hs[\"has_library\"]]",
        "",
    ]), executable = False)

ncclbind_inputs = repository_rule(
    implementation = _ncclbind_inputs_impl,
    environ = ["CUDA_HOME", "NCCLBIND_CACHE"],
    doc = "Exposes $CUDA_HOME and .cache/header_sets/* (see generator/header_sets.toml) by symlink.",
)
