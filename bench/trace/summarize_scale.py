"""How long `ncclbind.trace summarize` takes on a large trace: N call records over 2 ranks of one
communicator, written to a temporary folder, then summarized (tables, divergence, timeline PNG).
Run by hand: PYTHONPATH=bindings/python python3 bench/trace/summarize_scale.py [N]."""
import io
import json
import sys
import tempfile
import time
from pathlib import Path


def write_traces(folder: Path, calls: int) -> None:
    for rank in range(2):
        with open(folder / f"trace-host-{rank}.jsonl", "w") as f:
            f.write(json.dumps({"type": "process", "pid": rank, "rank_env": str(rank)}) + "\n")
            f.write(json.dumps({"type": "comm", "comm": 1, "t": 0, "nranks": 2, "rank": rank, "key": "k"}) + "\n")
            for i in range(calls // 2):
                f.write(json.dumps({"type": "call", "fn": "ncclAllReduce", "t": 10 + i * 1000, "tid": 1, "comm": 1,
                                    "count": 256, "bytes": 1024, "dtype": "ncclFloat32", "op": "ncclSum",
                                    "dur_ns": 900, "rc": 0}) + "\n")


def main() -> None:
    from ncclbind.trace import summarize
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        write_traces(folder, calls)
        start = time.perf_counter()
        summary = summarize(folder, png=str(folder / "timeline.png"), out=io.StringIO())
        took = time.perf_counter() - start
    print(f"{calls} call records, {len(summary.processes)} ranks: summarize {took:.1f} s "
          f"(timeline {'drawn' if summary.png else 'not drawn'})")


if __name__ == "__main__":
    main()
