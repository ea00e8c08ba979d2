"""@ncclbind_pytest_cases//:cases.bzl: PYTEST_CASES, {file name: [test function names]}
of the test files in `srcs`, read by tests/python/list_pytest_cases.py, so that
tests/python/BUILD can make one py_test per case. A label attribute is watched:
editing a listed test file re-runs this rule, and a new case is a new target."""

_PYTHON = "/usr/bin/python3"

def _pytest_cases_impl(rctx):
    script = rctx.path(rctx.attr._lister)
    files = [rctx.path(src) for src in rctx.attr.srcs]
    result = rctx.execute([_PYTHON, str(script)] + [str(f) for f in files], quiet = True)
    if result.return_code != 0:
        fail("\n@%s: %s failed:\n%s%s" % (rctx.name, script, result.stdout, result.stderr))
    rctx.file("BUILD", "")
    rctx.file("cases.bzl", result.stdout)

pytest_cases = repository_rule(
    implementation = _pytest_cases_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".py"], mandatory = True),
        "_lister": attr.label(default = Label("//tests/python:list_pytest_cases.py")),
    },
    local = False,
)

def pytest_test(name, test_file, case = None, pytest_args = [], **kwargs):
    """A py_test that runs pytest_main.py on `test_file`, or on its one test function
    `case`, with ncclbind and the support modules at hand."""
    native.py_test(
        name = name,
        srcs = [
            "pytest_main.py",
            test_file,
        ],
        args = [test_file + ("::" + case if case else "")] + pytest_args,
        main = "pytest_main.py",
        python_version = "PY3",
        deps = [
            ":support",
            "//bindings/python:ncclbind",
        ],
        **kwargs
    )
