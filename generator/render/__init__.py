"""Rendering: the analysed IR -> files, one Jinja2 template per emitted file kind.

Each language module exposes `outputs(ctx) -> [(path, template, variables)]`;
templates read only the IR objects (and the per-language type-spelling filters
registered here). Every C/C++/CUDA file is formatted with clang-format and the
repository's .clang-format (the Rust renderer runs rustfmt the same way).
"""
from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import sys

try:
    import jinja2
except ImportError:
    raise ModuleNotFoundError(f"python -m generator needs Jinja2, which {sys.executable} cannot import: on Debian 12 "
                              f"`bash tools/setup.sh` installs it (python3-jinja2) for /usr/bin/python3; or "
                              f"`{sys.executable} -m pip install jinja2==3.1.2`", name="jinja2") from None

from .. import VERSION

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
# One module per target language under generator/render/, each with render(ctx).
RENDERERS = ["c", "rust", "python", "policy_python", "policy_rust", "docs", "shim", "device_wrapper", "cute", "bench"]
TEMPLATES = REPO / "templates"
# Debian's clang-format (tools/setup.sh installs it): the same binary inside Bazel's sandbox,
# so the freshness test formats exactly as tools/regenerate.sh did.
CLANG_FORMAT = "/usr/bin/clang-format"
CLANG_FORMAT_STYLE = REPO / ".clang-format"
C_SUFFIXES = (".c", ".h", ".cc", ".cu")


@dataclass
class RenderContext:
    apis: list           # merged LibraryAPI per library
    irs: list            # HeaderSetIR per header set
    header_sets: list    # HeaderSet per header set
    conventions: object

    def api(self, library):
        return next(a for a in self.apis if a.library == library)

    def source_line(self, names) -> str:
        by_name = {hs.name: hs for hs in self.header_sets}
        return ", ".join(f"{n} ({by_name[n].source})" for n in names)


def environment(filters: dict) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(filters)
    env.globals["generator_version"] = VERSION
    return env


def render_files(env: jinja2.Environment, outputs) -> dict[str, str]:
    """{repo-relative path: text} for [(path, template, variables)]."""
    files = {}
    for path, template, variables in outputs:
        text = env.get_template(template).render(template_name=f"templates/{template}", **variables)
        files[path] = text
    return format_c(files)


class FormatError(Exception):
    """clang-format is missing or rejected a rendering; generation stops with the file's name."""


def clang_format(text: str, path: str) -> str:
    """text as clang-format formats it with the repository's style (`path` picks the language)."""
    if not Path(CLANG_FORMAT).is_file():
        raise FormatError(f"{CLANG_FORMAT} not found (apt-get install clang-format, or run tools/setup.sh): "
                          "the generated C is committed clang-formatted")
    if not CLANG_FORMAT_STYLE.is_file():
        raise FormatError(f"{CLANG_FORMAT_STYLE} not found: the generated C is formatted with that style")
    proc = subprocess.run([CLANG_FORMAT, f"--style=file:{CLANG_FORMAT_STYLE}", f"--assume-filename={path}"],
                          input=text, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FormatError(f"clang-format rejected the rendering of {path}:\n{proc.stderr}")
    return proc.stdout


def format_c(files: dict[str, str]) -> dict[str, str]:
    """The same files, with every C/C++/CUDA one clang-formatted (in parallel: one process per file)."""
    paths = [path for path in files if path.endswith(C_SUFFIXES)]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        formatted = dict(zip(paths, pool.map(lambda path: clang_format(files[path], path), paths)))
    return {path: formatted.get(path, text) for path, text in files.items()}
