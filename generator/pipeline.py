"""The generator's stages, in order: read header sets, extract IRs, merge, render."""
from __future__ import annotations

import hashlib
import json
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .header_sets import CACHE, HeaderSet, check_present, load_header_sets
from .ir import HeaderSetIR
from .ir.serialize import to_json
from .passes.policy import apply_conventions
from .policy.conventions import load_conventions


# The code that turns headers into header facts; binding policy (policy/, passes/policy.py,
# passes/directions.py, passes/naming.py) and the renderers are not in it.
EXTRACTION_CODE = ("clang_frontend.py", "header_sets.py", "passes/extract.py", "passes/macros.py",
                   "ir/*.py", "cuda_shims/*")


def _extract_one(args):
    from .passes.extract import extract_header_facts
    hs, all_sets = args
    return extract_header_facts(hs, all_sets, load_conventions())


def input_digest(hs: HeaderSet, all_sets: dict, conventions=None) -> str:
    """Everything a set's header facts depend on: the extraction code, the header
    facts of conventions.toml, and the bytes of every NCCL header of the set and of
    the sets it is parsed against."""
    h = hashlib.sha256()
    gen = Path(__file__).parent
    for path in sorted({p for pattern in EXTRACTION_CODE for p in gen.glob(pattern)}):
        h.update(path.relative_to(gen).as_posix().encode())
        h.update(path.read_bytes())
    facts = (conventions or load_conventions()).header_facts()
    h.update(json.dumps(facts, sort_keys=True).encode())
    chain, dep = [hs], hs.depends_on
    while dep:
        chain.append(all_sets[dep])
        dep = all_sets[dep].depends_on
    for s in chain:
        h.update(repr((s.name, s.version, s.headers)).encode())
        for path in sorted(s.include_root.rglob("nccl*")):
            for f in ([path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())):
                h.update(f.relative_to(s.include_root).as_posix().encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:24]


def extract_all(sets: list[HeaderSet] | None = None, jobs: int = 0, use_cache: bool = True) -> list[HeaderSetIR]:
    """Extract every header set, in parallel processes when jobs != 1, and apply the
    binding policy of conventions.toml.

    Header facts whose inputs (input_digest) are unchanged are read back from
    .cache/ir/ instead of being parsed again; the policy is applied after the cache."""
    sets = sets if sets is not None else load_header_sets()
    all_sets = {hs.name: hs for hs in load_header_sets()}
    all_sets.update({hs.name: hs for hs in sets})
    for hs in sets:
        check_present(hs)
    cache_dir = CACHE / "ir"
    conventions = load_conventions()
    paths = {hs.name: cache_dir / f"{hs.name}-{input_digest(hs, all_sets, conventions)}.pickle" for hs in sets}
    found = {}
    if use_cache:
        for hs in sets:
            if paths[hs.name].exists():
                found[hs.name] = pickle.loads(paths[hs.name].read_bytes())
    work = [(hs, all_sets) for hs in sets if hs.name not in found]
    if jobs == 1 or len(work) <= 1:
        fresh = [_extract_one(w) for w in work]
    else:
        with ProcessPoolExecutor(max_workers=jobs or None) as pool:
            fresh = list(pool.map(_extract_one, work))
    if use_cache:
        cache_dir.mkdir(parents=True, exist_ok=True)
        for ir in fresh:
            for old in cache_dir.glob(f"{ir.name}-*.pickle"):
                old.unlink()
            paths[ir.name].write_bytes(pickle.dumps(ir))
    found.update({ir.name: ir for ir in fresh})
    for ir in found.values():
        apply_conventions(ir, conventions)
    from .passes.capabilities import capabilities_of
    for hs in sets:  # not a header fact: set after the cache, so a change of the pin needs no parse
        found[hs.name].kernel_headers = kernel_headers_of(hs, all_sets)
        found[hs.name].capabilities = capabilities_of(found[hs.name])
    return [found[hs.name] for hs in sets]


def kernel_headers_of(hs: HeaderSet, all_sets: dict) -> dict | None:
    """The NCCL header set hs's library was compiled with (its kernel_headers), as the IR
    gives it: the set's name, library, version and version code."""
    if hs.kernel_headers is None:
        return None
    kernel = all_sets[hs.kernel_headers]
    return {"header_set": kernel.name, "library": kernel.library, "version": kernel.version,
            "version_code": kernel.version_code}


def ir_json_text(ir) -> str:
    return json.dumps(to_json(ir), indent=1, sort_keys=False) + "\n"


def api_json_text(api) -> str:
    return json.dumps(api.to_json(), indent=1, sort_keys=False) + "\n"


def write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def generate(sets=None, jobs: int = 0, use_cache: bool = True):
    """Every generated file as {repo-relative path: text}, plus the IRs and merged APIs."""
    from .passes.merge import merge_all
    import importlib

    from .render import RENDERERS, RenderContext
    sets = sets if sets is not None else [hs for hs in load_header_sets() if hs.default]
    irs = extract_all(sets, jobs=jobs, use_cache=use_cache)
    apis = merge_all(irs)
    ctx = RenderContext(apis, irs, sets, load_conventions())
    files = {f"bindings/ir/{ir.name}.json": ir_json_text(ir) for ir in irs}
    # The merged per-library API, exactly what the renderers below read.
    files.update({f"bindings/ir/api/{api.library}.json": api_json_text(api) for api in apis})
    for name in RENDERERS:
        files.update(importlib.import_module(f"generator.render.{name}").render(ctx))
    return files, irs, apis
