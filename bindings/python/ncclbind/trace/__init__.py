"""Trace every NCCL call of a program, without changing it, through ncclbind's shim.

    python -m ncclbind.trace run [--mode full|counts] [--out DIR] [--gpu-time] [--checkpoint] -- CMD ...
    python -m ncclbind.trace summarize DIR [--png FILE]
    python -m ncclbind.trace library          # build (once) and print the shim for the libnccl found

`run` preloads the shim variant of the NCCL release the program will load into CMD and
every process it starts; each process writes DIR/trace-<host>-<pid>.jsonl. `summarize`
prints a per-rank, per-collective table (calls, bytes, host time, GPU time, bus bandwidth),
draws a timeline (matplotlib), and names the first call where the ranks of a communicator
diverge (the usual cause of a hang). See docs/shim.md.
"""
from __future__ import annotations

from .library import find_library, nccl_release_of, shim_library
from .summary import Summary, TraceError, load_traces, summarize

__all__ = ["find_library", "nccl_release_of", "shim_library", "Summary", "TraceError", "load_traces", "summarize"]
