"""torch.distributed under the shim: DDP training steps on a tiny model, then collectives of
sizes nothing else uses, on every rank. Prints what it issued, for run.sh to compare with the
trace:
  "rank R: issued-exact FN COUNT DTYPE CALLS"   calls of exactly that count and type
  "rank R: issued-at-least FN COUNT DTYPE CALLS" (DDP's gradient all-reduces: torch may add its own)
    python torch_program.py NRANKS DIR"""
from __future__ import annotations

import datetime
import os
import sys

STEPS = 5
EXACT = {"all_reduce": 12345, "broadcast": 777, "all_gather": 333, "reduce_scatter": 555}


def rank_main(rank: int, nranks: int, directory: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.cuda.set_device(rank % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", init_method=f"file://{os.path.join(directory, 'torch.store')}", rank=rank,
                            world_size=nranks, timeout=datetime.timedelta(seconds=120), device_id=device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    ddp = DistributedDataParallel(model, device_ids=[device.index], bucket_cap_mb=25)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = ddp(torch.randn(8, 16, device=device)).square().sum()
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    print(f"rank {rank}: issued-at-least ncclAllReduce {parameters} ncclFloat32 {STEPS}", flush=True)

    n = EXACT
    x = torch.full((n["all_reduce"],), float(rank + 1), device=device)
    for _ in range(3):
        dist.all_reduce(x)
    b = torch.full((n["broadcast"],), float(rank), device=device)
    dist.broadcast(b, src=0)
    g_in = torch.full((n["all_gather"],), float(rank), device=device)
    g_out = torch.empty(n["all_gather"] * nranks, device=device)
    dist.all_gather_into_tensor(g_out, g_in)
    r_in = torch.ones(n["reduce_scatter"] * nranks, device=device)
    r_out = torch.empty(n["reduce_scatter"], device=device)
    dist.reduce_scatter_tensor(r_out, r_in)
    torch.cuda.synchronize()
    # x starts at rank + 1: one all-reduce gives s = 1 + ... + nranks, each further one multiplies by nranks
    ok = bool((b == 0).all()) and bool((r_out == nranks).all()) and \
        all(bool((g_out[i * n["all_gather"]:(i + 1) * n["all_gather"]] == i).all()) for i in range(nranks))
    first = float(x[0])
    s = sum(range(1, nranks + 1))
    ok = ok and abs(first - s * nranks ** 2) < 1e-3
    print(f"rank {rank}: issued-exact ncclAllReduce {n['all_reduce']} ncclFloat32 3", flush=True)
    print(f"rank {rank}: issued-exact ncclBroadcast {n['broadcast']} ncclFloat32 1", flush=True)
    print(f"rank {rank}: issued-exact ncclAllGather {n['all_gather']} ncclFloat32 1", flush=True)
    print(f"rank {rank}: issued-exact ncclReduceScatter {n['reduce_scatter']} ncclFloat32 1", flush=True)
    print(f"rank {rank}: data {'ok' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    import torch.multiprocessing as mp
    nranks, directory = int(sys.argv[1]), sys.argv[2]
    mp.spawn(rank_main, args=(nranks, directory), nprocs=nranks, join=True)
