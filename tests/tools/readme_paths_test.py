"""docs/architecture.md's "Where things are" tables name real paths: every file or folder they give in
backticks exists in the checkout, so the tables cannot drift from the tree unseen (a folder
renamed without its row fails here). A path in the per-feature table is relative to the layer's
root (the Python package, the Rust crate's src/, policy/) where it is not a path from the
top, and a path in a folder's row of the first table is relative to that folder too."""
import os
import re
import sys
import unittest
from pathlib import Path

# the checkout (through the runfiles' symlink to this file), not the sandbox's partial tree
REPO = Path(__file__).resolve().parents[2]
ROOTS = ["", "bindings/python/ncclbind/", "bindings/rust/src/", "bindings/python/src/", "policy/", "generator/"]
SUFFIXES = (".py", ".rs", ".c", ".h", ".toml", ".md", ".sh", ".j2", ".json", ".cc")


def section(text: str) -> str:
    start = text.index("## Where things are")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def is_path(token: str) -> bool:
    """A backticked token that is a path: a slash or a file suffix, and no placeholder (<set>),
    glob, command, code or module name."""
    if any(c in token for c in "<>*$( =:,") or token.startswith(("python", "-")):
        return False
    return "/" in token or token.endswith(SUFFIXES)


def paths(text: str) -> list[tuple[str, str]]:
    """(path, the folder of its row: the first cell's, up to a placeholder) for every path of the
    section's table rows."""
    out = []
    for line in section(text).splitlines():
        if not line.startswith("|"):
            continue
        first = re.findall(r"`([^`]+)`", line.split("|")[1])
        folder = first[0].split("<")[0] if first and first[0].endswith("/") else ""
        out += [(token.strip(), folder) for token in re.findall(r"`([^`]+)`", line) if is_path(token.strip())]
    return out


def exists(token: str, folder: str = "") -> bool:
    return any((REPO / (root + token)).exists() for root in [*ROOTS, folder])


class ReadmePathsTest(unittest.TestCase):
    def test_every_path_of_the_tables_exists(self):
        readme = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "docs" / "architecture.md").read_text()
        found = paths(readme)
        self.assertGreater(len(found), 40, f"too few paths read from the tables: {found}")
        missing = [p for p, folder in found if not exists(p, folder)]
        self.assertEqual(missing, [], f"docs/architecture.md's tables name paths the tree lacks (under {ROOTS})")

    def test_a_renamed_folder_is_seen(self):
        self.assertFalse(exists("bindings/no_such_folder/"))
        self.assertTrue(exists("bindings/device_wrapper/"))
        self.assertEqual(paths("## Where things are\n| `runtime/` | `src/no_such.c`, `a <b>` |\n## Next\n"),
                         [("runtime/", "runtime/"), ("src/no_such.c", "runtime/")])
        self.assertTrue(exists("src/loader.c", "runtime/") and not exists("src/no_such.c", "runtime/"))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
