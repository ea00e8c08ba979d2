"""What the generator needs of the Python side of the workspace.

py_test runs under //tools/bazel:python_toolchain, i.e. Debian's /usr/bin/python3. There,
every generator module must import (clang.cindex and jinja2 are Debian's packages); the
libclang that clang.cindex loads must be the release tools/setup.sh pins
(python3-clang-N, libclang1-N; argv[2]); and it must parse the first header of each of
@ncclbind_inputs' header sets (header_sets.json, argv[1]) the way the generator will.
"""
import importlib
import json
import os
import pkgutil
import re
import sys
import unittest

import clang.cindex

HEADER_SETS_JSON = None  # set from argv in __main__
SETUP_SH = None


def pinned_clang_releases(setup_sh):
    """{Debian package stem: release} of the clang packages tools/setup.sh installs."""
    with open(setup_sh) as f:
        text = f.read()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(python3-clang|libclang1)-(\d+)\b", text, re.M)}


def clang_major_of_loaded_libclang():
    """__clang_major__ as the loaded libclang itself expands it."""
    tu = clang.cindex.Index.create().parse("major.c", args=["-x", "c"],
                                           unsaved_files=[("major.c", "char major[__clang_major__];\n")])
    (decl,) = [c for c in tu.cursor.get_children() if c.spelling == "major"]
    return decl.type.get_array_size()


class PythonEnvTest(unittest.TestCase):
    def test_interpreter_is_debian_python(self):
        self.assertEqual(os.path.realpath(sys.executable), os.path.realpath("/usr/bin/python3"))
        self.assertGreaterEqual(sys.version_info[:2], (3, 11))

    def test_every_generator_module_imports(self):
        import generator
        names = [m.name for m in pkgutil.walk_packages(generator.__path__, "generator.")]
        self.assertIn("generator.clang_frontend", names)
        self.assertIn("generator.render", names)
        for name in names:
            with self.subTest(module=name):
                importlib.import_module(name)

    def test_libclang_is_the_pinned_release(self):
        pinned = pinned_clang_releases(SETUP_SH)
        self.assertEqual(sorted(pinned), ["libclang1", "python3-clang"], f"{SETUP_SH} pins no clang packages")
        self.assertEqual(pinned["python3-clang"], pinned["libclang1"], "the bindings and the library disagree")
        # Debian's python3-clang-N loads libclang-N.so by name; the library then says what it is.
        self.assertEqual(clang.cindex.conf.get_filename(), f"libclang-{pinned['libclang1']}.so")
        self.assertEqual(clang_major_of_loaded_libclang(), pinned["libclang1"])

    def test_libclang_parses_every_header_set(self):
        with open(HEADER_SETS_JSON) as f:
            desc = json.load(f)
        root = os.path.dirname(HEADER_SETS_JSON)
        index = clang.cindex.Index.create()
        self.assertTrue(desc["header_sets"])
        for hs in desc["header_sets"]:
            with self.subTest(header_set=hs["name"]):
                dirs = [os.path.join(root, d) for d in hs["include_dirs"]]
                header = os.path.join(dirs[0], hs["headers"][0])
                self.assertTrue(os.path.isfile(header), header)
                tu = index.parse(header, args=["-x", "c", "-std=c11"] + [f"-I{d}" for d in dirs])
                errors = [str(d) for d in tu.diagnostics if d.severity >= clang.cindex.Diagnostic.Error]
                self.assertEqual(errors, [])
                want = "ncclEpGetVersion" if hs["library"] == "nccl_ep" else "ncclGetVersion"
                decls = [c for c in tu.cursor.get_children()
                         if c.kind == clang.cindex.CursorKind.FUNCTION_DECL and c.spelling == want]
                self.assertEqual(len(decls), 1, want)
                if hs["depends_on"]:
                    # nccl_ep.h's <nccl.h> must be the one of the set it depends on.
                    nccl_h = {os.path.normpath(os.path.dirname(str(i.include.name)))
                              for i in tu.get_includes()
                              if os.path.basename(str(i.include.name)) == "nccl.h"}
                    self.assertEqual(nccl_h, {os.path.normpath(dirs[1])})


if __name__ == "__main__":
    HEADER_SETS_JSON = os.path.abspath(sys.argv.pop(1))
    SETUP_SH = os.path.abspath(sys.argv.pop(1))
    unittest.main()
