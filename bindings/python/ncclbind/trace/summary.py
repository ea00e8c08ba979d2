"""Reading a trace directory: per-rank, per-collective figures, a timeline and the first call
where the ranks of a communicator diverge."""
from __future__ import annotations

import bisect
import json
import os
import pathlib
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TextIO

# The record's "bus" code (nccl_shim.toml's factor, as the shim writes it): busbw = algbw * factor(n).
BUS_FACTORS = {1: lambda n: 1.0, 2: lambda n: (n - 1) / n, 3: lambda n: 2 * (n - 1) / n}


class TraceError(ValueError):
    """A trace directory that cannot be read, or (strict) a damaged record: file, line and why."""


# What each record type must hold, key -> accepted types, and what a call may hold. A record
# that breaks this (a cut line, a hand edit, another tool's file) is skipped and named.
NUMBER = (int, float)
REQUIRED = {
    "process": {},
    "comm": {"comm": (int, str), "t": NUMBER, "nranks": int, "rank": int, "key": (int, str)},
    "call": {"fn": str, "t": NUMBER, "tid": (int, str)},
    "counters": {"fn": str},
    "end": {},  # a communicator's end (destroy, abort): read by nothing here yet
}
OPTIONAL = {"call": {"count": int, "bytes": int, "dur_ns": NUMBER, "gpu_ms": NUMBER, "bus": int, "peer": int,
                     "root": int, "rc": int, "pending": bool, "bus_total": (bool, int), "comm": (int, str), "dtype": str,
                     "op": str}}


def _of_type(value, types) -> bool:
    """isinstance, except that a bool is not an int here unless bool is named."""
    types = types if isinstance(types, tuple) else (types,)
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def record_problem(r) -> str | None:
    """Why a parsed line is not a record this module can use, or None."""
    if not isinstance(r, dict):
        return f"not a JSON object ({type(r).__name__})"
    kind = r.get("type")
    if not isinstance(kind, str) or kind not in REQUIRED:
        return f"unknown record type {kind!r}"
    for key, types in REQUIRED[kind].items():
        if key not in r:
            return f"a {kind} record without {key!r}"
        if not _of_type(r[key], types):
            return f"{kind} record: {key} is {r[key]!r}"
    for key, types in OPTIONAL.get(kind, {}).items():
        if key in r and not _of_type(r[key], types):
            return f"{kind} record: {key} is {r[key]!r}"
    for key, value in r.items():  # JSON's \ud800 escapes give strings no output can print
        if isinstance(value, str) and not _is_text(value):
            return f"{kind} record: {key} is not valid Unicode text ({value!r})"
    if kind == "comm" and r["nranks"] < 1:
        return f"comm record: nranks is {r['nranks']}"
    return None


@dataclass
class Process:
    path: pathlib.Path
    header: dict
    comms: list = field(default_factory=list)      # "comm" records, in time order
    calls: list = field(default_factory=list)      # "call" records, in time order
    counters: dict = field(default_factory=dict)   # fn -> "counters" record (written at exit)
    rank: int = -1
    _by_handle: dict | None = None                 # handle -> (times, comm records), built once

    def comm_of(self, call: dict) -> dict | None:
        """The communicator a call used: the latest made with that handle before the call."""
        handle = call.get("comm")
        if handle is None:
            return None
        if self._by_handle is None:
            self._by_handle = {}
            for c in self.comms:  # in time order
                times, made = self._by_handle.setdefault(c["comm"], ([], []))
                times.append(c["t"])
                made.append(c)
        found = self._by_handle.get(handle)
        if found is None:
            return None
        times, made = found
        return made[max(bisect.bisect_right(times, call["t"]) - 1, 0)]


@dataclass
class Summary:
    processes: list
    rows: list            # dicts: rank, fn, calls, bytes, host_ms, gpu_ms, busbw_gbs
    divergences: list     # sentences
    png: str | None
    notes: list
    problems: list = field(default_factory=list)  # "file:line: why" of each record skipped


def load_traces(directory: str | os.PathLike, strict: bool = False,
                problems: list | None = None) -> list[Process]:
    """The processes of a trace directory. A damaged record is skipped and named ("file:line:
    why") in `problems`, or with strict raises TraceError; only regular files are read (a FIFO
    named like a trace would block)."""
    folder = pathlib.Path(directory)
    if not folder.is_dir():
        raise TraceError(f"{directory}: not a folder of traces")
    problems = problems if problems is not None else []

    def damaged(where: str) -> None:
        if strict:
            raise TraceError(where)
        problems.append(where)

    processes = []
    for path in sorted(folder.glob("trace-*.jsonl")):
        if not path.is_file():
            damaged(f"{path.name}: not a regular file, not read")
            continue
        p = None
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    damaged(f"{path.name}:{number}: not JSON (a line cut short by a kill?)")
                    continue
                why = record_problem(r)
                if why:
                    damaged(f"{path.name}:{number}: {why}")
                    continue
                kind = r["type"]
                if kind == "process":
                    p = Process(path, r)
                elif p is None:
                    damaged(f"{path.name}:{number}: a {kind} record before the process record")
                elif kind == "comm":
                    p.comms.append(r)
                elif kind == "call":
                    p.calls.append(r)
                elif kind == "counters":
                    p.counters[r["fn"]] = r
        if p is not None:
            # a call written as pending (still inside NCCL) and later returned is one call
            returned = {(c["tid"], c["t"]) for c in p.calls if not c.get("pending")}
            p.calls = [c for c in p.calls if not (c.get("pending") and (c["tid"], c["t"]) in returned)]
            p.comms.sort(key=lambda c: c["t"])
            p.calls.sort(key=lambda c: c["t"])
            processes.append(p)
    _assign_ranks(processes)
    return processes


def _assign_ranks(processes: list[Process]) -> None:
    """A process's rank: RANK (or the MPI rank) it ran with, else its rank in its largest
    communicator, else its order."""
    for i, p in enumerate(processes):
        env = str(p.header.get("rank_env", ""))
        if env.isdigit():
            p.rank = int(env)
        elif p.comms:
            largest = max(p.comms, key=lambda c: (c["nranks"], -c["t"]))
            p.rank = largest["rank"]
        else:
            p.rank = 1000 + i


def _is_collective(call: dict) -> bool:
    return "count" in call and "peer" not in call


def _signature(call: dict) -> str:
    parts = [f"count={call['count']}", call.get("dtype", "")]
    if "op" in call:
        parts.append(call["op"])
    if "root" in call:
        parts.append(f"root={call['root']}")
    return f"{call['fn']}({', '.join(parts)})"


def figures(processes: list[Process]) -> list[dict]:
    table: dict = defaultdict(lambda: {"calls": 0, "bytes": 0, "host_ns": 0, "gpu_ms": 0.0, "gpu_calls": 0,
                                       "bus_bytes": 0.0, "bus_known": False})
    for p in processes:
        for c in p.calls:
            if "count" not in c:
                continue
            row = table[(p.rank, c["fn"])]
            row["calls"] += 1
            row["bytes"] += c.get("bytes", 0)
            row["host_ns"] += c.get("dur_ns", 0)
            if "gpu_ms" in c and c["gpu_ms"] >= 0:
                row["gpu_ms"] += c["gpu_ms"]
                row["gpu_calls"] += 1
                comm = p.comm_of(c)
                n = comm["nranks"] if comm else 1
                factor = BUS_FACTORS.get(c.get("bus", 0))
                if factor and n > 0:
                    row["bus_known"] = True
                    total = c.get("bytes", 0) * (n if c.get("bus_total") else 1)
                    row["bus_bytes"] += total * factor(n)
    rows = []
    for (rank, fn), r in sorted(table.items()):
        timed = r["gpu_calls"] > 0 and r["gpu_ms"] > 0  # over the calls that have a GPU time
        rows.append({"rank": rank, "fn": fn, "calls": r["calls"], "bytes": r["bytes"],
                     "host_ms": r["host_ns"] / 1e6, "gpu_ms": r["gpu_ms"] if r["gpu_calls"] else None,
                     "busbw_gbs": r["bus_bytes"] / (r["gpu_ms"] * 1e-3) / 1e9 if timed and r["bus_known"] else None})
    return rows


def divergences(processes: list[Process]) -> list[str]:
    """For every communicator (matched across processes by the key all its ranks share), the
    first collective where its ranks' sequences differ or one rank stops."""
    sequences: dict = defaultdict(dict)  # key -> {rank in comm: [call]}
    sizes: dict = {}
    for p in processes:
        for c in p.calls:
            if not _is_collective(c):
                continue
            comm = p.comm_of(c)
            if comm is None:
                continue
            sizes[comm["key"]] = comm["nranks"]
            sequences[comm["key"]].setdefault(comm["rank"], []).append(c)
    found = []
    for key, by_rank in sorted(sequences.items()):
        ranks = sorted(by_rank)
        if len(ranks) < 2:
            continue
        longest = max(len(v) for v in by_rank.values())
        for i in range(longest):
            at = {r: (_signature(by_rank[r][i]) if i < len(by_rank[r]) else None) for r in ranks}
            if len(set(at.values())) > 1:
                said = "; ".join(f"rank {r}: {s or 'no call (it stopped here: a hang waits on it)'}"
                                 for r, s in at.items())
                found.append(f"communicator {key} ({sizes[key]} ranks): the ranks diverge at collective #{i + 1}: "
                             f"{said}")
                break
        missing = sizes[key] - len(ranks)
        if missing > 0:
            found.append(f"communicator {key}: {missing} of its {sizes[key]} ranks left no trace of a collective on it")
    return found


def timeline(processes: list[Process], png: str) -> str | None:
    """A PNG of every call per rank over time; None (with the reason) without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    calls = [(p.rank, c) for p in processes for c in p.calls if "count" in c]
    if not calls:
        return None
    start = min(c["t"] for _, c in calls)
    names = sorted({c["fn"] for _, c in calls})
    colors = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    ranks = sorted({r for r, _ in calls})
    fig, ax = plt.subplots(figsize=(12, 1 + 0.6 * len(ranks)))
    row_of = {r: i for i, r in enumerate(ranks)}
    spans = defaultdict(list)  # (rank, fn) -> [(start ms, length ms)]: one broken_barh each, not a bar per call
    for rank, c in calls:
        spans[(rank, c["fn"])].append(((c["t"] - start) / 1e6, max(c.get("dur_ns", 0), 1) / 1e6))
    end = max((c["t"] - start) / 1e6 + max(c.get("dur_ns", 0), 1) / 1e6 for _, c in calls)
    for (rank, fn), xs in spans.items():
        ax.broken_barh(_merged(xs, end / 5000), (row_of[rank] - 0.3, 0.6), facecolors=colors[fn])
    ax.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks])
    ax.set_xlabel("host time (ms from the first call)")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in names], labels=names,
              loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def _merged(spans: list, resolution: float) -> list:
    """(start, length) spans, sorted, with those closer than `resolution` (a fraction of a pixel
    of the timeline's width) drawn as one: a million calls stay a few thousand rectangles."""
    out: list = []
    for begin, length in sorted(spans):
        if out and begin - (out[-1][0] + out[-1][1]) < resolution:
            last_begin, last_length = out[-1]
            out[-1] = (last_begin, max(last_length, begin + length - last_begin))
        else:
            out.append((begin, length))
    return out


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def summarize(directory: str | os.PathLike, png: str | None = None, out: TextIO = sys.stdout,
              strict: bool = False) -> Summary:
    """Print the tables, the divergences and the damaged records of a trace directory (strict:
    TraceError at the first damaged record instead)."""
    problems: list = []
    processes = load_traces(directory, strict=strict, problems=problems)
    rows = figures(processes)
    notes = []
    found = divergences(processes)
    png_path = png or str(pathlib.Path(directory) / "timeline.png")
    made = timeline(processes, png_path)
    if made is None:
        try:
            import matplotlib  # noqa: F401
            notes.append("no timeline: no collective calls in the traces")
        except ImportError:
            notes.append("no timeline: matplotlib is not installed (pip install matplotlib, or Debian python3-matplotlib)")
    print(f"{len(processes)} process trace(s) in {directory}", file=out)
    print(f"{'rank':>5} {'function':<26} {'calls':>8} {'bytes':>10} {'host ms':>10} {'GPU ms':>10} {'busbw GB/s':>11}",
          file=out)
    for r in rows:
        gpu = f"{r['gpu_ms']:.3f}" if r["gpu_ms"] is not None else "-"
        bus = f"{r['busbw_gbs']:.2f}" if r["busbw_gbs"] is not None else "-"
        print(f"{r['rank']:>5} {r['fn']:<26} {r['calls']:>8} {_size(r['bytes']):>10} {r['host_ms']:>10.3f} {gpu:>10} "
              f"{bus:>11}", file=out)
    for p in processes:
        failed = [c for c in p.calls if c.get("rc", 0) not in (0, 7)]
        if failed:
            c = failed[0]
            print(f"rank {p.rank} (pid {p.header.get('pid')}): {len(failed)} failed call(s); the first: {c['fn']} -> "
                  f"{c.get('result') or c.get('rc')}", file=out)
    for p in processes:
        for c in p.calls:
            if c.get("pending"):
                print(f"rank {p.rank} (pid {p.header.get('pid')}, thread {c['tid']}): still inside {_signature(c) if 'count' in c else c['fn']} "
                      f"when its trace ended (a hang there)", file=out)
    if found:
        for line in found:
            print(f"DIVERGENCE: {line}", file=out)
    else:
        print("no divergence: every communicator's ranks made the same collectives", file=out)
    if made:
        print(f"timeline: {made}", file=out)
    for note in notes:
        print(note, file=out)
    if problems:
        print(f"{len(problems)} damaged record(s) skipped (--strict stops at the first):", file=out)
        for where in problems[:20]:
            print(f"  {where}", file=out)
        if len(problems) > 20:
            print(f"  ... and {len(problems) - 20} more", file=out)
    return Summary(processes, rows, found, made, notes, problems)
