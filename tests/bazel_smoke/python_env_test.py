"""Smoke test of the Python side of the workspace.

Runs under //tools/bazel:python_toolchain, i.e. Debian's /usr/bin/python3, which must have
python3-clang-19 and python3-jinja2; and reads @ncclbind_inputs' header sets through
runfiles (header_sets.json, passed as argv[1]), parsing each set's first header with
libclang the way the generator will.
"""
import json
import os
import sys
import unittest

import clang.cindex
import jinja2

HEADER_SETS_JSON = None  # set from argv in __main__


class PythonEnvTest(unittest.TestCase):
    def test_interpreter_is_debian_python(self):
        self.assertEqual(os.path.realpath(sys.executable), os.path.realpath("/usr/bin/python3"))
        self.assertGreaterEqual(sys.version_info[:2], (3, 11))

    def test_jinja2_renders(self):
        self.assertEqual(jinja2.Template("{{ a }}+{{ b }}").render(a=1, b=2), "1+2")

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
    unittest.main()
