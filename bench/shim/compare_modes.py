"""Run bench_calls without the shim and under it in each mode (off, counts, full) and print
one table of ns per call and the shim's added cost against the goals (off < 5 ns,
counts < 100 ns, full < 400 ns). Figures are reported, never asserted.
    python compare_modes.py BENCH_BINARY SHIM_LIBRARY [bench args...]"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

GOALS = {"off": 5, "counts": 100, "full": 400}


def run(binary, args, preload=None, mode=None, directory=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    # The same environment's size either way: a getenv inside libnccl scans all of it.
    env.update(NCCLBIND_SHIM_MODE=mode or "off", NCCLBIND_SHIM_DIR=directory or "")
    if preload:
        env["LD_PRELOAD"] = preload
    else:
        env["NCCLBIND_BENCH_PADDING"] = "x" * len(shim_path)
    out = subprocess.run([binary, *args], env=env, capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines() if line.strip()}


shim_path = ""


def main():
    global shim_path
    binary, shim, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    shim_path = shim
    with tempfile.TemporaryDirectory() as directory:
        rows = {"no shim": run(binary, args, directory=directory)}
        for mode in GOALS:
            rows[mode] = run(binary, args, shim, mode, directory)
        written = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    calls = list(rows["no shim"])
    print(f"{'':10}" + "".join(f"{c:>22}" for c in calls))
    for name, row in rows.items():
        cells = []
        for c in calls:
            added = row[c] - rows["no shim"][c]
            cells.append(f"{row[c]:9.1f} ns" + ("" if name == "no shim" else f" ({added:+6.1f})"))
        print(f"{name:10}" + "".join(f"{cell:>22}" for cell in cells))
    for mode, goal in GOALS.items():
        worst = max(rows[mode][c] - rows["no shim"][c] for c in calls)
        print(f"{mode}: at most {worst:+.1f} ns added per call (goal < {goal} ns): {'met' if worst < goal else 'NOT met'}")
    print(f"(full mode wrote {written} bytes of trace)")


if __name__ == "__main__":
    main()
