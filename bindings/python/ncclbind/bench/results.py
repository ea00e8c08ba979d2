"""BenchResult: one (backend, collective, size, placement) measurement, aggregated over the
ranks as nccl-tests does (-a: rank 0, average, min or max time; #wrong summed); LatencyResult:
one (backend, collective, size) of the latency pass, its rounds aggregated the same way; and
the JSON file that holds a run."""
from __future__ import annotations

import dataclasses
import json
import statistics

from .collectives import COLLECTIVES, bandwidths
from .config import BenchConfig


@dataclasses.dataclass
class BenchResult:
    backend: str
    collective: str
    size: int            # bytes, nccl-tests' size column
    count: int           # elements passed to NCCL
    dtype: str
    op: str
    root: int
    in_place: bool
    time_us: float
    algbw: float         # GB/s
    busbw: float         # GB/s
    wrong: int | None    # None: not checked (-c 0, or no in-place check for this collective)
    nranks: int
    iters: int
    # An out-of-place row the backend ran in place (it has no out-of-place form: torch's
    # all_reduce, broadcast, reduce): marked in its table and never the best of a comparison.
    ran_in_place: bool = False

    @classmethod
    def from_json(cls, data: dict) -> BenchResult:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


def aggregate(backend: str, config: BenchConfig, nranks: int, per_rank: list[list[dict]]) -> list[BenchResult]:
    """BenchResults from every rank's result records (the workers' "result" lines), matched by
    (collective, size, in_place); a record missing on some rank is an error."""
    keyed = []
    for records in per_rank:
        keyed.append({(r["collective"], r["size"], bool(r["in_place"])): r for r in records})
    keys = list(keyed[0]) if keyed else []
    for rank, table in enumerate(keyed):
        if set(table) != set(keys):
            missing = sorted(set(keys) ^ set(table))[:3]
            raise ValueError(f"{backend}: rank {rank} reported other results than rank 0 (e.g. {missing})")
    out = []
    for key in keys:
        records = [table[key] for table in keyed]
        times = [float(r["time_us"]) for r in records]
        time_us = {0: times[0], 1: statistics.fmean(times), 2: min(times), 3: max(times)}[config.average]
        wrongs = [r["wrong"] for r in records]
        if any(w is not None and (type(w) is not int or w < 0) for w in wrongs):
            raise ValueError(f"{backend}: {key}: #wrong is not a count >= 0 on some rank: {wrongs}")
        if len({w is None for w in wrongs}) > 1:  # every rank checks the same rows: a gap hides nothing
            raise ValueError(f"{backend}: {key}: checked on some ranks only: #wrong per rank {wrongs}")
        wrong = None if wrongs[0] is None else sum(wrongs)
        first = records[0]
        collective = COLLECTIVES[first["collective"]]
        algbw, busbw = bandwidths(collective, first["size"], time_us, nranks)
        out.append(BenchResult(backend=backend, collective=first["collective"], size=first["size"],
                               count=first["count"], dtype=config.dtype,
                               op=config.op if collective.has_op else "none",
                               root=config.root if collective.has_root else -1, in_place=key[2],
                               time_us=time_us, algbw=algbw, busbw=busbw, wrong=wrong, nranks=nranks,
                               iters=int(first.get("iters", config.iters)),
                               ran_in_place=bool(first.get("ran_in_place", 0))))
    return out


@dataclasses.dataclass
class LatencyResult:
    """One backend, collective and size of the latency pass: per round, the median batch's time
    per call, over the ranks as -a says; median_us is the median round, min_us..max_us the range."""
    backend: str
    collective: str
    size: int            # bytes, as the size column of the tables
    count: int
    in_place: bool
    median_us: float
    min_us: float
    max_us: float
    rounds: list         # us per call, one per round (over the ranks)
    iters: int           # calls per round
    nranks: int
    fast_path: list | None = None  # ncclbind: [warm-up calls made by the C fast path, given to Python], all ranks

    @classmethod
    def from_json(cls, data: dict) -> LatencyResult:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


def aggregate_latency(config: BenchConfig, nranks: int, per_rank: list[list[dict]]) -> list[LatencyResult]:
    """LatencyResults from every rank's "latency" records, matched by (backend, collective, size);
    round i over the ranks as -a says (rank 0, average, min, max), then the median and range of the
    rounds. A record missing on some rank, or a different number of rounds, is an error."""
    keyed = [{(r["backend"], r["collective"], r["size"]): r for r in records} for records in per_rank]
    keys = list(keyed[0]) if keyed else []
    for rank, table in enumerate(keyed):
        if set(table) != set(keys):
            missing = sorted(set(keys) ^ set(table))[:3]
            raise ValueError(f"latency pass: rank {rank} reported other results than rank 0 (e.g. {missing})")
    combine = {0: lambda v: v[0], 1: statistics.fmean, 2: min, 3: max}[config.average]
    out = []
    for key in keys:
        records = [table[key] for table in keyed]
        if len({len(r["rounds"]) for r in records}) != 1 or not records[0]["rounds"]:
            raise ValueError(f"latency pass: {key}: ranks report {[len(r['rounds']) for r in records]} rounds")
        rounds = [combine([float(r["rounds"][i]) for r in records]) for i in range(len(records[0]["rounds"]))]
        counts = [r.get("fast_path") for r in records]
        fast_path = None if any(c is None for c in counts) else [sum(c[0] for c in counts), sum(c[1] for c in counts)]
        first = records[0]
        out.append(LatencyResult(backend=key[0], collective=key[1], size=key[2], count=first["count"],
                                 in_place=bool(first["in_place"]), median_us=statistics.median(rounds),
                                 min_us=min(rounds), max_us=max(rounds), rounds=rounds, iters=int(first["iters"]),
                                 nranks=nranks, fast_path=fast_path))
    return out


def write_json(path: str, config: BenchConfig, backends: dict, results: list[BenchResult], environment: dict,
               latency: list[LatencyResult] | None = None, latency_pass: dict | None = None) -> None:
    """backends: {name: {"status": ran|failed|unavailable, "reason": ...}}; latency: the latency
    pass's results, latency_pass its {"status", "reason", ...}."""
    document = {"tool": "ncclbind.bench", "config": config.to_json(), "environment": environment,
                "backends": backends, "results": [dataclasses.asdict(r) for r in results],
                "latency_pass": latency_pass or {"status": "not run", "reason": ""},
                "latency": [dataclasses.asdict(r) for r in latency or []]}
    with open(path, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def read_json(path: str) -> tuple[BenchConfig, dict, list[BenchResult], dict]:
    with open(path) as f:
        document = json.load(f)
    return (BenchConfig.from_json(document["config"]), document["backends"],
            [BenchResult.from_json(r) for r in document["results"]], document.get("environment", {}))


def read_latency(path: str) -> tuple[dict, list[LatencyResult]]:
    """The latency pass of a JSON file: ({"status", "reason", ...}, its results)."""
    with open(path) as f:
        document = json.load(f)
    return (document.get("latency_pass", {"status": "not run", "reason": ""}),
            [LatencyResult.from_json(r) for r in document.get("latency", [])])
