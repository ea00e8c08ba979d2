"""python -m generator {diff, check-compat, contract-log}."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .compat import by_subject, check_compat
from .describe import grouped, kind_counts, section_counts
from .diff import diff_surfaces
from .ir_json import load_ir
from .surface import api_surface


def load_header_set_ir(policy: str):
    """A HeaderSetIR from a header set's name (header_sets.toml) or an IR JSON file."""
    from .. import pipeline
    from ..header_sets import load_header_sets
    path = Path(policy)
    if policy.endswith(".json") or path.is_file():
        if not path.is_file():
            raise SystemExit(f"{policy}: no such IR file")
        return load_ir(path)
    sets = {hs.name: hs for hs in load_header_sets()}
    if policy not in sets:
        raise SystemExit(f"{policy}: neither an IR JSON file nor a header set ({', '.join(sorted(sets))})")
    return pipeline.extract_all([sets[policy]])[0]


def _pair(args):
    old, new = load_header_set_ir(args.old), load_header_set_ir(args.new)
    if old.library != new.library:
        print(f"note: {old.name} is {old.library} and {new.name} is {new.library}", file=sys.stderr)
    return old, new


def cmd_diff(args) -> int:
    old, new = _pair(args)
    events = diff_surfaces(api_surface(old), api_surface(new))
    if args.json:
        print(json.dumps({"old": old.name, "new": new.name, "counts": section_counts(events),
                          "kinds": kind_counts(events), "events": [e.to_json() for e in events]}, indent=1))
        return 0
    print(f"{old.name} -> {new.name}: {len(events)} changes")
    for section, c in section_counts(events).items():
        print(f"  {section:<13} " + ", ".join(f"{n} {what}" for what, n in c.items()))
    for title, lines in grouped(events):
        print(f"\n{title}")
        for line in lines:
            print(f"  {line}")
    return 0


def cmd_check_compat(args) -> int:
    old, new = _pair(args)
    report = check_compat(old, new)
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
        return 1 if report.breaks else 0
    print(f"check-compat {old.name} -> {new.name}: code built against {old.name}, running on {new.name}")
    for label, findings in (("BREAK", report.breaks), ("MOVED", report.moved), ("not a break", report.not_breaks)):
        for subject, reasons in by_subject(findings):
            print(f"{label}: {subject}")
            for reason, whats in reasons:
                print(f"  {reason}:")
                for what in whats:
                    print(f"    {what}")
    n = len(by_subject(report.breaks))
    if report.breaks:
        print(f"{len(report.breaks)} ABI breaks in {n} items for users of {old.name}")
        return 1
    print(f"no ABI breaks for users of {old.name}")
    return 0


def cmd_contract_log(args) -> int:
    """Write (extend) every library's contract log and the changes page."""
    from .. import pipeline
    from ..policy.conventions import load_conventions
    from ..header_sets import REPO, load_header_sets
    from ..passes.merge import merge_all
    from ..render import RenderContext
    from ..render import docs
    sets = [hs for hs in load_header_sets() if hs.default]
    irs = pipeline.extract_all(sets, jobs=args.jobs)
    files = docs.render(RenderContext(merge_all(irs), irs, sets, load_conventions()), rebuild_logs=args.rebuild)
    changed = []
    for rel, text in sorted(files.items()):
        path = REPO / rel
        if args.check:
            if not path.exists() or path.read_text() != text:
                changed.append(rel)
        elif pipeline.write_if_changed(path, text):
            changed.append(rel)
    for rel in changed:
        print(f"{'out of date' if args.check else 'wrote'}: {rel}")
    print(f"{len(files)} contract files, {len(changed)} {'out of date' if args.check else 'changed'}")
    return 1 if args.check and changed else 0


def add_subcommands(sub) -> None:
    d = sub.add_parser("diff", help="the API changes between two header sets (names or bindings/ir/*.json)")
    d.add_argument("old")
    d.add_argument("new")
    d.add_argument("--json", action="store_true", help="the events as JSON, for tools")
    d.set_defaults(func=cmd_diff)
    c = sub.add_parser("check-compat", help="exit 1 if code built against OLD breaks on NEW (ABI)")
    c.add_argument("old")
    c.add_argument("new")
    c.add_argument("--json", action="store_true", help="the verdicts as JSON")
    c.set_defaults(func=cmd_check_compat)
    g = sub.add_parser("contract-log", help="extend bindings/contract/<library>.log.json and docs/api-changes.md")
    g.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    g.add_argument("--rebuild", action="store_true",
                   help="rewrite the logs from the header sets at hand "
                        "(breaks append-only: say why in the commit)")
    g.add_argument("--jobs", type=int, default=0)
    g.set_defaults(func=cmd_contract_log)
