"""The checked-in generated files are exactly what a regeneration from the
default header sets gives (tools/regenerate.sh rewrites them)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(os.path.abspath(__file__)).parent.parent.parent))

from generator import pipeline  # noqa: E402
from generator.header_sets import REPO  # noqa: E402


def main() -> int:
    files, _, _ = pipeline.generate(use_cache=False)
    stale = [rel for rel, text in sorted(files.items())
             if not (REPO / rel).exists() or (REPO / rel).read_text() != text]
    on_disk = {p.relative_to(REPO).as_posix() for p in (REPO / "bindings").rglob("*")
               if p.is_file() and p.name != "BUILD" and p.parts[-3:-1] != ("bindings", "rust")}
    generated_dirs = {str(Path(rel).parent) for rel in files}
    orphans = sorted(p for p in on_disk - set(files) if str(Path(p).parent) in generated_dirs)
    for rel in stale:
        print(f"out of date: {rel}")
    for rel in orphans:
        print(f"no longer generated: {rel}")
    if stale or orphans:
        print("run tools/regenerate.sh and commit the result")
        return 1
    print(f"{len(files)} generated files are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
