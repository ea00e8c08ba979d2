"""Ranks that disagree: every rank makes three all-reduces, then rank 1 (the last) a broadcast
the others never join; they synchronize and the last rank waits for ever. run.sh runs it
under `python -m ncclbind.trace run --timeout`, and `summarize` must name collective #4.
    python divergent_program.py NRANKS DIR"""
from __future__ import annotations

import multiprocessing
import os
import sys


def rank_main(rank: int, nranks: int, directory: str) -> None:
    import torch

    import nccl_ctypes as nccl
    comm = nccl.init(rank, nranks, os.path.join(directory, "divergent.id"))
    x = torch.ones(1024, device="cuda")
    for _ in range(3):
        nccl.all_reduce(comm, x, x, rank)
    if rank == nranks - 1:
        nccl.broadcast(comm, x, 0, rank)  # nobody else joins: this rank hangs here
    torch.cuda.synchronize()
    print(f"rank {rank}: done (the others wait in vain)", flush=True)
    import ncclbind.shim as shim
    shim.flush()
    nccl.abort(comm)


if __name__ == "__main__":
    nranks, directory = int(sys.argv[1]), sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, nranks, directory)) for r in range(nranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
