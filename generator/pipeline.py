"""The generator's stages, in order: read header sets, extract IRs, merge, render."""
from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .conventions import load_conventions
from .header_sets import HeaderSet, check_present, load_header_sets
from .ir import HeaderSetIR
from .ir.serialize import to_json


def _extract_one(args):
    from .passes.extract import extract_header_set
    hs, all_sets = args
    return extract_header_set(hs, all_sets, load_conventions())


def extract_all(sets: list[HeaderSet] | None = None, jobs: int = 0) -> list[HeaderSetIR]:
    """Extract every header set (in parallel processes when jobs != 1)."""
    sets = sets if sets is not None else load_header_sets()
    all_sets = {hs.name: hs for hs in load_header_sets()}
    all_sets.update({hs.name: hs for hs in sets})
    for hs in sets:
        check_present(hs)
    work = [(hs, all_sets) for hs in sets]
    if jobs == 1 or len(work) == 1:
        return [_extract_one(w) for w in work]
    with ProcessPoolExecutor(max_workers=jobs or None) as pool:
        return list(pool.map(_extract_one, work))


def ir_json_text(ir) -> str:
    return json.dumps(to_json(ir), indent=1, sort_keys=False) + "\n"


def write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def generate(sets=None, jobs: int = 0):
    """Every generated file as {repo-relative path: text}, plus the IRs and merged APIs."""
    from .conventions import load_conventions
    from .passes.merge import merge_all
    import importlib

    from .render import RENDERERS, RenderContext
    sets = sets if sets is not None else [hs for hs in load_header_sets() if hs.default]
    irs = extract_all(sets, jobs=jobs)
    apis = merge_all(irs)
    ctx = RenderContext(apis, irs, sets, load_conventions())
    files = {f"bindings/ir/{ir.name}.json": ir_json_text(ir) for ir in irs}
    for name in RENDERERS:
        files.update(importlib.import_module(f"generator.render.{name}").render(ctx))
    return files, irs, apis
