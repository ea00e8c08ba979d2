"""Run bench_calls without the shim and under it in each mode (off, counts, full), in rounds, and
print ns per call and the shim's added cost against the goals (off < 5 ns, counts < 100 ns,
full < 400 ns). Figures are reported, never asserted.
    python compare_modes.py BENCH_BINARY SHIM_LIBRARY [--rounds R] [bench args...]

A round runs each of the four in its own process (the preload and the mode are per process),
in an order rotated from round to round, so a slow stretch of the machine falls on every mode
alike; each process prints its median over batches. Per mode: the median of the R rounds'
figures, and min..max over the rounds. The added cost is taken per round (the mode's figure
minus that round's no-shim figure), then its median and min..max over the rounds.

The goals are judged on the trivial call (get_version) and the in-place 2-float all-reduce:
on a GPU, NCCL skips the copy of an in-place one-rank all-reduce, so what is left is the
host's cost of a call, which is what the shim adds to. The out-of-place all-reduce is printed
too but not judged: on a GPU it waits on a device copy whose jitter (about 1 us on H200) is
far larger than the goals."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

MODES = ["no shim", "off", "counts", "full"]
GOALS = {"off": 5, "counts": 100, "full": 400}
JUDGED = ["get_version", "all_reduce_in_place"]
SHOWN = ["get_version", "all_reduce_in_place", "all_reduce"]


def run(binary, args, shim, mode, directory):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    # The same environment's size either way: a getenv inside libnccl scans all of it.
    env.update(NCCLBIND_SHIM_MODE="off" if mode == "no shim" else mode, NCCLBIND_SHIM_DIR=directory)
    if mode == "no shim":
        env["NCCLBIND_BENCH_PADDING"] = "x" * len(shim)
    else:
        env["LD_PRELOAD"] = shim
    out = subprocess.run([binary, *args], env=env, capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines() if line.strip()}


def trace_bytes(directory):
    """The bytes the full mode wrote, then removed (a full run writes hundreds of MB)."""
    total = 0
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        total += os.path.getsize(path)
        os.remove(path)
    return total


def spread(values):
    return statistics.median(values), min(values), max(values)


def main():
    binary, shim, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    rounds = 7
    if args[:1] == ["--rounds"]:
        rounds, args = int(args[1]), args[2:]
    figures = {mode: [] for mode in MODES}  # per mode: one {call: ns} per round
    written = 0
    with tempfile.TemporaryDirectory() as directory:
        for r in range(rounds):
            order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
            for mode in order:
                figures[mode].append(run(binary, args, shim, mode, directory))
                written += trace_bytes(directory)
    print(f"ns per call: median of {rounds} rounds [min..max over the rounds]; each round runs each mode in its own "
          f"process, in rotated order; a process's figure is its median over batches (bench_calls {' '.join(args)})")
    added = {}
    for call in SHOWN:
        note = "" if call in JUDGED else " (not judged: on a GPU it waits on a device copy whose jitter swamps the goals)"
        print(f"\n{call}{note}")
        print(f"  {'':10}{'ns/call':>10}  {'[min..max]':<20}{'added':>9}  [min..max]")
        base = [f[call] for f in figures["no shim"]]
        for mode in MODES:
            ns = [f[call] for f in figures[mode]]
            median, low, high = spread(ns)
            line = f"  {mode:10}{median:10.1f}  [{low:.1f}..{high:.1f}]".ljust(44)
            if mode != "no shim":
                diffs = [x - b for x, b in zip(ns, base)]
                added[mode, call] = spread(diffs)
                a, lo, hi = added[mode, call]
                line += f"{a:+9.1f}  [{lo:+.1f}..{hi:+.1f}]"
            print(line.rstrip())
    print()
    for mode, goal in GOALS.items():
        parts = ", ".join(f"{added[mode, call][0]:+.1f} ns ({call})" for call in JUDGED)
        met = all(added[mode, call][0] < goal for call in JUDGED)
        over = sum(any(f[call] - b[call] >= goal for call in JUDGED) for f, b in zip(figures[mode], figures["no shim"]))
        verdict = "met" if met else "NOT met"
        if over:
            verdict += f" ({over} of {rounds} rounds at or over it)"
        print(f"{mode}: {parts} added per call (goal < {goal} ns): {verdict}")
    print(f"(full mode wrote {written} bytes of trace over {rounds} rounds)")


if __name__ == "__main__":
    main()
