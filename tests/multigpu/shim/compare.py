"""Compare what GPU programs said they issued with their traces (run.sh's checks).

    python compare.py issued OUTPUT TRACE_DIR   # "rank R: issued-exact FN COUNT DTYPE N",
                                               # "rank R: issued-at-least FN COUNT DTYPE N",
                                               # "rank R: issued FN N BYTES" lines of OUTPUT
    python compare.py consistent TRACE_DIR     # every trace: records = its exit counters; ranks agree
Prints PASS/FAIL lines; exits 1 on a failure."""
from __future__ import annotations

import collections
import re
import sys

from ncclbind.trace.summary import divergences, load_traces

failures = 0
# torch's broadcast is ncclBcast (in place) in some releases and ncclBroadcast in others.
SAME_CALL = {"ncclBroadcast": {"ncclBroadcast", "ncclBcast"}}


def verdict(ok: bool, what: str) -> None:
    global failures
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)


def by_rank(directory):
    processes = load_traces(directory)
    out = collections.defaultdict(list)
    for p in processes:
        out[p.rank].extend(c for c in p.calls if c.get("rc", 0) in (0, 7))
    return processes, out


def issued(output: str, directory: str) -> None:
    text = open(output).read()
    processes, calls = by_rank(directory)
    verdict(bool(processes), f"{directory}: {len(processes)} process trace(s)")
    for m in re.finditer(r"^rank (\d+): issued-(exact|at-least) (\w+) (\d+) (\w+) (\d+)$", text, re.M):
        rank, kind, fn, count, dtype, n = int(m[1]), m[2], m[3], int(m[4]), m[5], int(m[6])
        names = SAME_CALL.get(fn, {fn})
        got = sum(1 for c in calls[rank] if c["fn"] in names and c.get("count") == count and c.get("dtype") == dtype)
        ok = got == n if kind == "exact" else got >= n
        verdict(ok, f"rank {rank}: {fn}(count={count}, {dtype}): issued {n}{'' if kind == 'exact' else ' or more'}, "
                    f"traced {got}")
    for m in re.finditer(r"^rank (\d+): issued (\w+) (\d+) (\d+)$", text, re.M):
        rank, fn, n, size = int(m[1]), m[2], int(m[3]), int(m[4])
        got = [c for c in calls[rank] if c["fn"] == fn]
        traced = sum(c.get("bytes", 0) for c in got)
        verdict(len(got) == n and traced == size,
                f"rank {rank}: {fn}: issued {n} calls, {size} bytes; traced {len(got)} calls, {traced} bytes")


def consistent(directory: str) -> None:
    processes, calls = by_rank(directory)
    verdict(bool(processes), f"{directory}: {len(processes)} process trace(s)")
    for p in processes:
        recorded = collections.Counter(c["fn"] for c in p.calls)
        counted = {fn: r["calls"] for fn, r in p.counters.items()}
        verdict(dict(recorded) == counted,
                f"pid {p.header.get('pid')} (rank {p.rank}): {sum(recorded.values())} records = the shim's counters "
                f"at exit" + ("" if dict(recorded) == counted else f" (records {dict(recorded)}, counters {counted})"))
    found = divergences(processes)
    verdict(not found, "the ranks of every communicator made the same collectives" + "".join(f"; {d}" for d in found))

if __name__ == "__main__":
    if sys.argv[1] == "issued":
        issued(sys.argv[2], sys.argv[3])
    else:
        consistent(sys.argv[2])
    sys.exit(1 if failures else 0)
