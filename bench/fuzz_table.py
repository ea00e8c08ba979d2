"""Issue 24's fuzz table: every fuzz class of tests/fuzz (the ones CI runs, with larger counts),
over the stand-in libraries, counted as tried / clean / raw exception / silent accept / valid
refused / crash / hang, for this checkout and, with --before, another one in the same run.

    /usr/bin/python3 bench/fuzz_table.py                       # this checkout
    git worktree add /tmp/before <commit>
    (cd /tmp/before && /usr/bin/python3 setup.py build_ext --inplace)
    /usr/bin/python3 bench/fuzz_table.py --before /tmp/before  # before | now, one row per class
    /usr/bin/python3 bench/fuzz_table.py --verbose             # the first cases of each outcome

The inputs are always this checkout's (tests/fuzz); --before names whose ncclbind (its
bindings/python, with the extension built in place) and whose generator run them. Python
classes need this checkout's extension built in place too (setup.py build_ext --inplace).
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import driver  # noqa: E402

COUNTS = {"calls": 10000, "prepare": 10000, "vcollectives": 5000, "config": 5000, "watchdog": 2000,
          "misc": 10000, "ep": 5000, "threads": 200, "bench_flags": 100, "trace_input": 100, "header_sets": 200,
          "headers": 60}
COLUMNS = ("clean", "raw", "silent", "refused", "crash", "hang")


def cells(tally: driver.Tally) -> list[str]:
    return [str(tally.tried)] + [str(tally.counts.get(c, 0)) for c in COLUMNS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=pathlib.Path, help="another checkout to run the same cases against")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every class's count")
    parser.add_argument("--classes", help="comma-separated (default: all)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    names = args.classes.split(",") if args.classes else list(COUNTS)
    roots = ([("before", args.before.resolve())] if args.before else []) + [("now", ROOT)]
    with tempfile.TemporaryDirectory() as tmp:
        libraries = driver.build_stand_ins(pathlib.Path(tmp))
        results = {}
        for name in names:
            count = max(1, int(COUNTS[name] * args.scale))
            for label, root in roots:
                tally = driver.run_class(name, count, args.seed, root, libraries)
                results[(name, label)] = tally
                print(f"{name} {label}: {dict(tally.counts)} in {tally.seconds:.1f} s", file=sys.stderr, flush=True)
                if args.verbose:
                    for line in tally.failures():
                        print("   ", line[:300], file=sys.stderr)
    header = ["class", "tried", *COLUMNS]
    if args.before:
        header = ["class"] + [f"{c} (before / now)" for c in header[1:]]
    print("| " + " | ".join(header) + " |")
    print("| --- |" + " ---: |" * (len(header) - 1))
    totals = {label: [0] * (len(COLUMNS) + 1) for label, _ in roots}
    for name in names:
        row = [cells(results[(name, label)]) for label, _ in roots]
        for (label, _), values in zip(roots, row):
            totals[label] = [t + int(v) for t, v in zip(totals[label], values)]
        print(f"| {name} | " + " | ".join(" / ".join(v) for v in zip(*row)) + " |")
    print("| all | " + " | ".join(" / ".join(map(str, v)) for v in zip(*(totals[label] for label, _ in roots))) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
