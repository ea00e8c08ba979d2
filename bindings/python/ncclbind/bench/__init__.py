"""ncclbind.bench: nccl-tests' benchmark tables for ncclbind (Python, Rust, C) side by side
with torch.distributed, CuPy and nccl4py (docs/bench.md).

    python -m ncclbind.bench -b 8 -e 1G -f 2 -g 2 --collectives all_reduce,all_gather -J out.json --plot out.png

BenchConfig holds a run's settings (parse_args reads nccl-tests' flags into one), BenchResult
one measurement; the workers (worker.py, bench/cli/c, bench/cli/rust) print JSON lines that
the driver aggregates."""
from __future__ import annotations

from .config import BenchConfig, BenchConfigError, parse_args
from .results import BenchResult


def main(argv=None) -> int:
    from .cli import main as cli_main
    return cli_main(argv)


__all__ = ["BenchConfig", "BenchConfigError", "BenchResult", "main", "parse_args"]
