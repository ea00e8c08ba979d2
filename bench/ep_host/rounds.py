"""Runs each layer's ep_host program once per round, a process each, the order rotating from round to
round, and prints one table: per layer the median of the rounds' ns per dispatch and per combine
(min..max of the rounds), and what the layer adds over C (its median minus C's). bench/ep_host/run.sh
builds the programs and calls this:

    python3 rounds.py --rounds 7 --n 100000 --c ep_host_c --rust ep_host_rust --python-script ep_host.py
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# (key, what the row measures, the program's arguments from the command line's paths)
LAYERS = [
    ("direct", "stand-in alone: ncclEpDispatch/Combine via dlsym", lambda a: [a.c, "direct"]),
    ("c", "C: nb_ncclEpDispatch / nb_ncclEpCombine", lambda a: [a.c, "c"]),
    ("rust", "Rust: ncclbind::ep Handle::dispatch / combine", lambda a: [a.rust, "rust"]),
    ("python", "Python: ncclbind.ep Handle.dispatch / combine", lambda a: [a.python, a.python_script, "python"]),
    ("python_prepared", "Python prepared: ncclbind.ep.prepare's steps",
     lambda a: [a.python, a.python_script, "python_prepared"]),
    ("python_raw", "Python raw: _nccl_ep.dispatch / combine", lambda a: [a.python, a.python_script, "python_raw"]),
    ("python_checked", "Python checked: Handle.dispatch / combine, every call checked (new records)",
     lambda a: [a.python, a.python_script, "python_checked"]),
]


def run(command: list[str], n: int) -> dict:
    done = subprocess.run(command + [str(n)], capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("EP_HOST ")]
    if done.returncode != 0 or len(lines) != 1:
        sys.exit(f"rounds.py: {' '.join(command)} {n}: exit {done.returncode}, {len(lines)} EP_HOST lines\n"
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return json.loads(lines[0][len("EP_HOST "):])


def table(results: dict[str, list[dict]], rounds: int, n: int) -> str:
    def median(key: str, phase: str) -> float:
        return statistics.median(r[f"{phase}_ns"] for r in results[key])

    def cell(key: str, phase: str) -> str:
        values = [r[f"{phase}_ns"] for r in results[key]]
        return f"{median(key, phase):.0f} ({min(values):.0f}..{max(values):.0f})"

    rows = [("layer", "dispatch ns", "combine ns", "added over C")]
    for key, what, _ in LAYERS:
        if key == "c":
            added = "-"
        else:
            added = (f"dispatch {median(key, 'dispatch') - median('c', 'dispatch'):+.0f}, "
                     f"combine {median(key, 'combine') - median('c', 'combine'):+.0f}")
        rows.append((what, cell(key, "dispatch"), cell(key, "combine"), added))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"ns per call: median of {rounds} rounds (min..max), {n} calls of each per round"]
    for i, row in enumerate(rows):
        lines.append(" | ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("-|-".join("-" * width for width in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=100000, help="dispatches (and combines) timed per round")
    parser.add_argument("--c", required=True, help="the built ep_host.c")
    parser.add_argument("--rust", required=True, help="the built rust/ep_host.rs (release)")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs ep_host.py")
    parser.add_argument("--python-script", required=True, help="ep_host.py")
    parser.add_argument("--verbose", action="store_true", help="also print each process's line")
    args = parser.parse_args()
    if args.rounds < 1 or args.n < 1:
        parser.error("--rounds and --n must be 1 or more")
    results: dict[str, list[dict]] = {key: [] for key, _, _ in LAYERS}
    for r in range(args.rounds):
        order = LAYERS[r % len(LAYERS):] + LAYERS[:r % len(LAYERS)]
        for key, _, command in order:
            result = run(command(args), args.n)
            results[key].append(result)
            if args.verbose:
                print(f"round {r + 1}: {json.dumps(result)}", flush=True)
    print(table(results, args.rounds, args.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
