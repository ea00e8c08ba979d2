"""What every multi-GPU Python program of tests/multigpu does around its ranks, once: the
environment that keeps NVLS (multicast) off, a free TCP port for the ranks' rendezvous, how many
ranks to run or why to skip, the libraries named by NCCLBIND_NCCL_PATH / NCCLBIND_NCCL_EP_PATH
loaded before torch, and one spawned process per rank under one deadline with a summary line.
Each program keeps its own rank_main(rank, nranks, ...) and imports this module by path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import launch

Importing it sets NVLS_OFF in os.environ, in the launching process and (since every spawned rank
imports the program again) in every rank, before anything loads NCCL or torch.
//tests/multigpu:launch_test runs it on a CPU.

Every multi-GPU Python program uses it: python/ranks.py, ep/python/ep_ranks.py,
ep/python/ep_bench.py, device/numba_ranks.py, device/oneshot_bench.py, devapi/cuda_cpp_kernel.py
(which counts its GPUs in a child process, see torch_gpu_count), symmetric/sym_ranks.py and
symmetric/sym_bench.py; only the shim's checkpoint_program.py and divergent_program.py, which
shim/run.sh runs under the trace tool, start their ranks themselves.
"""
from __future__ import annotations

import multiprocessing
import os
import socket
import time
from typing import Callable, Sequence

# Multicast objects must never be created on the lent GPU machines (../.library/device).
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NVLS_OFF)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for rank 0's TCPStore)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_named_libraries_first() -> None:
    """torch links its own libnccl.so.2 (its wheel's) and loads it at import; the runtime refuses to
    run on that copy when NCCLBIND_NCCL_PATH names another. Loading the libraries that
    NCCLBIND_NCCL_PATH / NCCLBIND_NCCL_EP_PATH name before torch is imported makes torch bind to
    the same libnccl (one per process, by its SONAME). Exits naming the variable when one of them
    cannot be loaded."""
    import ncclbind
    for library, variable in (("nccl", "NCCLBIND_NCCL_PATH"), ("nccl_ep", "NCCLBIND_NCCL_EP_PATH")):
        if os.environ.get(variable):
            info = ncclbind.library_info(library)
            if not info.loaded:
                raise SystemExit(f"{variable}={os.environ[variable]}: {info.error}")


def loaded_nccl():
    """ncclbind's libnccl, loaded now: a program that imports torch calls this first, at import
    (every spawned rank imports the program again), so that torch binds to the same libnccl (the
    one NCCLBIND_NCCL_PATH names). Its library_info; exits with a FAIL line when it cannot load."""
    import ncclbind
    info = ncclbind.library_info("nccl")
    if not info.loaded:
        print(f"FAIL: ncclbind cannot load libnccl: {info}", flush=True)
        raise SystemExit(1)
    return info


def torch_gpu_count() -> int:
    """How many GPUs torch sees (0 without CUDA). Initializes CUDA in this process; a program that
    must not do that before spawning its ranks counts them in a child process of its own."""
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def ranks_to_run(argv: Sequence[str], devices: int, default: int | None = None) -> int | None:
    """The rank count a program's command line asks for: its first argument that does not start
    with "--", else `default`, else one rank per GPU. None, after printing the SKIPPED line the GPU
    session's scripts look for, when there is no GPU or fewer GPUs than ranks asked."""
    if devices <= 0:
        print("SKIPPED: no GPU", flush=True)
        return None
    positional = [a for a in argv if not a.startswith("--")]
    nranks = int(positional[0]) if positional else (default if default is not None else devices)
    if nranks < 1:
        raise SystemExit(f"the rank count must be at least 1, not {nranks}")
    if nranks > devices:
        print(f"SKIPPED: {nranks} ranks asked, {devices} GPUs present", flush=True)
        return None
    return nranks


def run_ranks(target: Callable[..., object], nranks: int, args: Sequence[object] = (), *, timeout: float,
              name: str) -> int:
    """Runs target(rank, nranks, *args) in a spawned process per rank, waits up to `timeout`
    seconds for all of them together, kills (and names) the ranks still running then, a hang,
    prints "<name>: N ranks, P passed, F failed" (naming the failed ranks) and returns the exit
    status for the program: 1 if a rank failed or hung, else 0. A rank fails by exiting non-zero
    (sys.exit, an uncaught exception, a signal)."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(rank, nranks, *args)) for rank in range(nranks)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for rank, p in enumerate(procs):
        if p.is_alive():
            print(f"FAIL rank {rank} still running after {timeout:g} s (a hang, or a peer that never came): "
                  "killed", flush=True)
            p.kill()
            p.join()
    failed = [rank for rank, p in enumerate(procs) if p.exitcode != 0]
    print(f"{name}: {nranks} ranks, {nranks - len(failed)} passed, {len(failed)} failed"
          + (f" (ranks {', '.join(map(str, failed))})" if failed else ""), flush=True)
    return 1 if failed else 0
