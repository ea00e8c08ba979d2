"""Collectives in a loop with a checkpoint in the middle: every rank prepares (its
communicators drained and destroyed by the shim), frees what GPU memory it can, restores,
and goes on with the same handle; the data must be right before and after.
    python checkpoint_program.py NRANKS DIR     (under python -m ncclbind.trace run --checkpoint)
prints "rank R: issued ncclAllReduce N BYTES" and "rank R: checkpoint ok"."""
from __future__ import annotations

import multiprocessing
import os
import sys

STEPS, CHECKPOINT_AT, COUNT = 8, 4, 1 << 16


def rank_main(rank: int, nranks: int, directory: str) -> None:
    import torch

    import ncclbind.shim as shim
    import nccl_ctypes as nccl
    comm = nccl.init(rank, nranks, os.path.join(directory, "checkpoint.id"))
    assert shim.checkpoint_enabled(), "run under python -m ncclbind.trace run --checkpoint"
    for step in range(STEPS):
        if step == CHECKPOINT_AT:
            torch.cuda.synchronize()
            shim.checkpoint_prepare()
            assert shim.live_communicators() == 0
            torch.cuda.empty_cache()  # what a checkpoint would free; the handle stays the program's
            shim.checkpoint_restore()
            assert shim.live_communicators() == 1
            print(f"rank {rank}: checkpoint prepared and restored at step {step}", flush=True)
        x = torch.full((COUNT,), float(rank + 1 + step), device="cuda")
        y = torch.empty_like(x)
        nccl.all_reduce(comm, x, y, rank)
        torch.cuda.synchronize()
        expected = sum(r + 1 + step for r in range(nranks))
        if not bool((y == expected).all()):
            raise SystemExit(f"rank {rank}: step {step}: all-reduce gave {y[:4].tolist()}, not {expected}")
    nccl.destroy(comm, rank)
    print(f"rank {rank}: issued ncclAllReduce {STEPS} {STEPS * COUNT * 4}", flush=True)
    print(f"rank {rank}: checkpoint ok", flush=True)


if __name__ == "__main__":
    nranks, directory = int(sys.argv[1]), sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, nranks, directory)) for r in range(nranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    sys.exit(max(abs(p.exitcode or 0) for p in procs))
