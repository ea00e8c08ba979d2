"""python -m generator {generate,dump-ir,...}"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import pipeline
from .header_sets import HeaderSetsError, load_header_sets
from .policy.common import PolicyError


def cmd_dump_ir(args) -> int:
    sets = [hs for hs in load_header_sets(args.header_sets) if not args.set or hs.name in args.set]
    irs = pipeline.extract_all(sets, jobs=args.jobs)
    if args.out:
        out = Path(args.out)
        for ir in irs:
            pipeline.write_if_changed(out / f"{ir.name}.json", pipeline.ir_json_text(ir))
    else:
        for ir in irs:
            sys.stdout.write(pipeline.ir_json_text(ir))
    return 0


def cmd_generate(args) -> int:
    from .header_sets import REPO
    t0 = time.perf_counter()
    files, irs, apis = pipeline.generate(jobs=args.jobs, use_cache=not args.no_cache)
    stale = []
    for rel, text in sorted(files.items()):
        path = REPO / rel
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(rel)
        elif pipeline.write_if_changed(path, text):
            stale.append(rel)
    elapsed = time.perf_counter() - t0
    print(f"{'header set':<16} {'functions':>9} {'structs':>7} {'enums':>5} {'constants':>9} "
          f"{'initializers':>12} {'typedefs':>8} {'skipped':>7}")
    for ir in irs:
        s = ir.summary()
        print(f"{ir.name:<16} {s['functions']:>9} {s['structs']:>7} {s['enums']:>5} {s['constants']:>9} "
              f"{s['initializers']:>12} {s['typedefs']:>8} {s['skipped']:>7}")
    if args.skipped:
        for ir in irs:
            for sk in ir.skipped:
                print(f"  skipped {ir.name} {sk.kind} {sk.name} ({sk.location}): {sk.reason}")
            for rn in ir.renamed:
                print(f"  renamed {ir.name} {rn.kind} {rn.name} ({rn.location}): {rn.reason}")
    else:
        print("skipped items and why: bindings/ir/<set>.json 'skipped', or run with --skipped")
    print_losses(irs)
    print_coverage(apis, full=args.coverage)
    for hs in load_header_sets():
        if not (hs.lib_dir / hs.soname).is_file():
            print(f"note: {hs.name} has no {hs.soname} in {hs.lib_dir} (headers only): generated and compiled; "
                  "no test loads its library")
    if args.check:
        if stale:
            print("generated files out of date (run tools/regenerate.sh):\n  " + "\n  ".join(stale))
            return 1
        print(f"{len(files)} generated files are up to date ({elapsed:.2f} s)")
    else:
        print(f"{len(files)} files, {len(stale)} changed ({elapsed:.2f} s)")
    return 0


def print_losses(irs) -> None:
    """One line per header set that offers less than the set before it of its library."""
    from .passes.capabilities import losses
    previous = {}
    for ir in sorted(irs, key=lambda ir: (ir.library, ir.version_code)):
        before = previous.get(ir.library)
        lost = losses(before, ir) if before is not None else []
        if lost:
            print(f"loss: {ir.name} has less than {before.name}: {'; '.join(lost)}")
        previous[ir.library] = ir


def print_coverage(apis, full: bool = True) -> None:
    """How Python and Rust cover each function of each library with a policy: with full, one line
    per function; else one line per library, counted (idiomatic in both / in one only / raw only)."""
    from .policy.coverage import load_coverage
    from .policy.common import POLICY_DIR
    for api in apis:
        if not (POLICY_DIR / f"{api.library}_coverage.toml").exists():
            continue
        coverage = load_coverage(api)
        pending = [c.function for c in coverage if c.pending]
        if pending:
            print(f"warning: {api.library}: {len(pending)} function(s) in neither policy/{api.library}.toml nor "
                  f"{api.library}_coverage.toml, bound as the raw call only: {', '.join(pending)}")
        if not full:
            both = sum(1 for c in coverage if c.python and c.rust)
            python = sum(1 for c in coverage if c.python and not c.rust)
            rust = sum(1 for c in coverage if c.rust and not c.python)
            raw = len(coverage) - both - python - rust
            print(f"{api.library}: {len(coverage)} functions: {both} with a Python and a Rust method, "
                  f"{python} Python only, {rust} Rust only, {raw} as the raw call only "
                  f"(every function, with its method or its reason: python -m generator coverage)")
            continue
        print(f"coverage of {api.library} (policy/{api.library}.toml, {api.library}_coverage.toml):")
        for c in coverage:
            print(f"  {c.function:<32} {c.line}")


def cmd_coverage(args) -> int:
    from .passes.merge import merge_all
    sets = [hs for hs in load_header_sets() if hs.default]
    print_coverage(merge_all(pipeline.extract_all(sets, jobs=args.jobs)))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m generator")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump-ir", help="write the IR of each header set as deterministic JSON")
    d.add_argument("--set", action="append", help="only this header set (repeatable)")
    d.add_argument("--out", help="directory for <set>.json (default: stdout)")
    d.add_argument("--jobs", type=int, default=0)
    d.add_argument("--header-sets", metavar="TOML", help="read the sets from TOML, not generator/header_sets.toml")
    d.set_defaults(func=cmd_dump_ir)
    g = sub.add_parser("generate", help="regenerate every binding from the default header sets")
    g.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    g.add_argument("--skipped", action="store_true", help="list every skipped item with its reason")
    g.add_argument("--coverage", action="store_true",
                   help="list how Python and Rust cover every function (default: a count per library)")
    g.add_argument("--jobs", type=int, default=0)
    g.add_argument("--no-cache", action="store_true", help="parse every header set again (ignore .cache/ir)")
    g.set_defaults(func=cmd_generate)
    c = sub.add_parser("coverage", help="how Python and Rust cover each function (policy, coverage data)")
    c.add_argument("--jobs", type=int, default=0)
    c.set_defaults(func=cmd_coverage)
    from .contract import cli as contract_cli
    contract_cli.add_subcommands(sub)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except ModuleNotFoundError as e:
        if e.name not in ("clang", "jinja2"):
            raise
        print(f"error: {e}", file=sys.stderr)  # says what to install (clang_frontend, render)
        return 2
    except (HeaderSetsError, PolicyError) as e:  # one line naming the file, the entry and what is wrong
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        # A header that does not parse: clang's diagnostics are the whole story. (A ParseError
        # can only come from clang_frontend, so it is imported if one was raised.)
        frontend = sys.modules.get("generator.clang_frontend")
        if frontend is None or not isinstance(e, frontend.ParseError):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
