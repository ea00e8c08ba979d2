"""Rendering: the analysed IR -> files, one Jinja2 template per emitted file kind.

Each language module exposes `outputs(ctx) -> [(path, template, variables)]`;
templates read only the IR objects (and the per-language type-spelling filters
registered here).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .. import VERSION

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
# One module per target language under generator/render/, each with render(ctx).
RENDERERS = ["c", "rust", "python", "spec_python", "spec_rust", "docs"]
TEMPLATES = REPO / "templates"


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
    return files
