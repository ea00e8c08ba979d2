"""The API contract, rendered: each library's append-only change log
(bindings/contract/<library>.log.json, extended from the checked-in one, see
contract/log.py) and the page of changes between consecutive supported
versions (docs/api-changes.md)."""
from __future__ import annotations

from . import REPO, RenderContext, environment, render_files
from ..contract.compat import by_subject, check_compat
from ..contract.describe import SECTION_TITLES, grouped, section_counts
from ..contract.diff import diff_surfaces
from ..contract.log import extend_log, log_path, log_text, parse_log
from ..contract.surface import api_surface
from ..passes.merge import version_key


def library_log(library: str, irs, rebuild: bool = False) -> str:
    """The library's log: the checked-in one, checked against `irs` and extended by them
    (with `rebuild`, the checked-in one is ignored and the log starts again from `irs`)."""
    path = REPO / log_path(library)
    entries = []
    if path.exists() and not rebuild:
        logged_library, entries = parse_log(path.read_text())
        if logged_library != library:
            raise ValueError(f"{path}: a log of {logged_library}, not {library}")
    return log_text(library, extend_log(entries, irs))


def _step(old_ir, new_ir) -> dict:
    events = diff_surfaces(api_surface(old_ir), api_surface(new_ir))
    report = check_compat(old_ir, new_ir)
    return {"old": old_ir, "new": new_ir, "counts": section_counts(events), "sections": grouped(events),
            "event_count": len(events), "breaks": by_subject(report.breaks),
            "not_breaks": by_subject(report.not_breaks), "moved": by_subject(report.moved)}


def _first(ir) -> dict:
    surface = api_surface(ir)
    return {SECTION_TITLES[s]: len(items) for s, items in surface.items()}


def outputs(ctx: RenderContext):
    libraries = []
    for api in ctx.apis:
        irs = sorted((ir for ir in ctx.irs if ir.library == api.library), key=lambda ir: version_key(ir.version))
        libraries.append({"name": api.library, "irs": irs, "log": log_path(api.library),
                          "first": _first(irs[0]),
                          "steps": [_step(a, b) for a, b in zip(irs, irs[1:])]})
    sources = ctx.source_line([ir.name for ir in ctx.irs])
    return [("docs/api-changes.md", "docs/api-changes.md.j2",
             {"libraries": libraries, "sources": sources, "section_titles": SECTION_TITLES})]


def render(ctx: RenderContext, rebuild_logs: bool = False) -> dict[str, str]:
    files = render_files(environment({}), outputs(ctx))
    for api in ctx.apis:
        irs = [ir for ir in ctx.irs if ir.library == api.library]
        files[log_path(api.library)] = library_log(api.library, irs, rebuild_logs)
    return files
