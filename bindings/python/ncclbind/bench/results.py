"""BenchResult: one (backend, collective, size, placement) measurement, aggregated over the
ranks as nccl-tests does (-a: rank 0, average, min or max time; #wrong summed), and the JSON
file that holds a run."""
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

    @classmethod
    def from_json(cls, data: dict) -> BenchResult:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


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
        wrong = None if any(w is None or w < 0 for w in wrongs) else sum(wrongs)
        first = records[0]
        collective = COLLECTIVES[first["collective"]]
        algbw, busbw = bandwidths(collective, first["size"], time_us, nranks)
        out.append(BenchResult(backend=backend, collective=first["collective"], size=first["size"],
                               count=first["count"], dtype=config.dtype,
                               op=config.op if collective.has_op else "none",
                               root=config.root if collective.has_root else -1, in_place=key[2],
                               time_us=time_us, algbw=algbw, busbw=busbw, wrong=wrong, nranks=nranks,
                               iters=int(first.get("iters", config.iters))))
    return out


def write_json(path: str, config: BenchConfig, backends: dict, results: list[BenchResult], environment: dict) -> None:
    """backends: {name: {"status": ran|failed|unavailable, "reason": ...}}."""
    document = {"tool": "ncclbind.bench", "config": config.to_json(), "environment": environment,
                "backends": backends, "results": [dataclasses.asdict(r) for r in results]}
    with open(path, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def read_json(path: str) -> tuple[BenchConfig, dict, list[BenchResult], dict]:
    with open(path) as f:
        document = json.load(f)
    return (BenchConfig.from_json(document["config"]), document["backends"],
            [BenchResult.from_json(r) for r in document["results"]], document.get("environment", {}))
