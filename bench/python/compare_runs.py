"""Side by side: bench_allreduce.py --json runs of two builds (before / after a change), each row
as its cost over its group's raw C row ("+us vs raw", best enqueue time), averaged over the runs
of each side. Rows one side lacks show "-".

    python3 bench/python/compare_runs.py --before b1.json b2.json --after a1.json a2.json [--rows REGEX]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics

SUFFIX = " (enqueue us/call)"


def over_raw(run: dict) -> dict[str, float]:
    """{row: best enqueue us/call minus its group's raw C row's} for one run."""
    rows = {name[:-len(SUFFIX)]: value for name, value in run["rows"].items() if name.endswith(SUFFIX)}
    out, raw = {}, None
    for name, value in rows.items():  # rows come in group order, each group led by its raw C row
        if name.startswith("raw C "):
            raw = value
        elif raw is not None:
            out[name] = value - raw
    return out


def mean_over_runs(paths: list[str]) -> dict[str, float]:
    runs = [over_raw(json.load(open(p))) for p in paths]
    names = [n for n in runs[0] if all(n in r for r in runs)]
    return {n: statistics.mean(r[n] for r in runs) for n in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", nargs="+", required=True)
    parser.add_argument("--after", nargs="+", required=True)
    parser.add_argument("--rows", default="", help="only rows matching this regular expression")
    args = parser.parse_args()
    before, after = mean_over_runs(args.before), mean_over_runs(args.after)
    match = re.compile(args.rows).search
    names = [n for n in dict.fromkeys([*before, *after]) if match(n)]
    width = max(map(len, names), default=10)
    print(f"{'row (+us over its raw C row, best enqueue, mean of runs)':<{width}}  {'before':>7} {'after':>7} {'change':>7}")
    for n in names:
        b, a = before.get(n), after.get(n)
        cells = [f"{v:+7.3f}" if v is not None else f"{'-':>7}" for v in (b, a)]
        change = f"{a - b:+7.3f}" if a is not None and b is not None else f"{'':>7}"
        print(f"{n:<{width}}  {cells[0]} {cells[1]} {change}")


if __name__ == "__main__":
    main()
