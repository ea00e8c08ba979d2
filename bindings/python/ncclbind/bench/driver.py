"""The driver: for every backend, start one worker per rank (worker.py, or the C and Rust
programs of bench/cli/, which speak the same lines), gather their results, and aggregate
them over the ranks. Two ways to get ranks:

- spawn (default): this process starts `-t x -g` workers itself, one per GPU, sharing a
  fresh temporary rendezvous directory (unique ids as files, torch's FileStore);
- launched: under mpirun (OMPI_COMM_WORLD_RANK / PMI_RANK) or torchrun (RANK, WORLD_SIZE),
  each process is one rank and starts its own worker per backend; the ranks meet in
  --rendezvous (or a directory named after the job), where each writes its results and rank
  0 gathers them and prints.

A backend that cannot run here (not installed, no worker binary, no GPU for --host-memory)
is reported with the reason, never dropped silently."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from .collectives import COLLECTIVES
from .config import BenchConfig, BenchConfigError

WORKER_BINARY = {"c": "ncclbind_bench_worker_c", "rust": "ncclbind_bench_worker"}


def launched_rank() -> tuple[int, int, int] | None:
    """(rank, nranks, local rank) when mpirun or torchrun started this process, else None."""
    env = os.environ
    for rank, size, local in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                              ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
                              ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        if rank in env and size in env:
            r, n = int(env[rank]), int(env[size])
            return r, n, int(env.get(local, r))
    return None


def visible_gpus() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except ImportError:
        from ..core.cuda import device_count
        return device_count()


def _package_root() -> str:
    # The folder holding the ncclbind package as this process imported it. Not resolved: under
    # Bazel the package's .py files are links into the source tree, which has no built _nccl.
    return str(pathlib.Path(os.path.abspath(__file__)).parents[2])


def availability(name: str, config: BenchConfig) -> tuple[list[str] | None, str]:
    """(the worker command before its arguments, "") or (None, why the backend cannot run)."""
    python = [sys.executable, "-m", "ncclbind.bench.worker"]
    if name == "ncclbind":
        return python, ""
    if name in ("torch", "cupy", "nccl4py"):
        if config.host_memory:
            return None, "--host-memory: this backend needs GPU memory"
        module = {"torch": "torch", "cupy": "cupy", "nccl4py": "nccl"}[name]
        try:
            found = importlib.util.find_spec(module) is not None
            if found and name == "nccl4py":
                found = importlib.util.find_spec("nccl.core") is not None
        except (ImportError, ValueError):
            found = False
        return (python, "") if found else (None, f"{module if name != 'nccl4py' else 'nccl.core'} is not installed")
    explicit = config.c_worker if name == "c" else config.rust_worker
    candidates = [explicit] if explicit else []
    if not explicit and name == "rust":
        for base in (pathlib.Path(_package_root()).parents[1], pathlib.Path.cwd()):
            candidates.append(str(base / "bindings" / "rust" / "target" / "gpu" / WORKER_BINARY["rust"]))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return [path], ""
    how = ("bench/cli/c/build.sh (on the GPU machine), then --c-worker or NCCLBIND_BENCH_C_WORKER" if name == "c"
           else "bench/cli/rust/build.sh (where Rust is), then --rust-worker or NCCLBIND_BENCH_RUST_WORKER")
    where = f" ({', '.join(c for c in candidates if c)} is missing)" if any(candidates) else ""
    return None, f"no worker binary{where}: build it with {how}"


def worker_arguments(config: BenchConfig, name: str, rank: int, nranks: int, device: int, uid_file: str) -> list[str]:
    sizes = config.sizes()
    args = ["--backend", name, "--rank", str(rank), "--nranks", str(nranks), "--device", str(device),
            "--uid-file", uid_file, "--collectives", ",".join(config.collectives),
            "--sizes", ",".join(map(str, sizes)), "--iters", ",".join(str(config.iterations(s)) for s in sizes),
            "--warmups", f"{config.warmups(max(sizes))},{config.warmups(min(sizes))}",
            "--dtype", config.dtype, "--op", config.op, "--root", str(config.root), "--check", str(config.check),
            "--blocking", str(config.blocking), "--register", str(config.register)]
    return args + (["--host-memory"] if config.host_memory else [])


def expected_results(config: BenchConfig, nranks: int) -> int:
    """Result lines one rank prints for one backend (the progress bar's unit)."""
    total = 0
    for name in config.collectives:
        collective = COLLECTIVES[name]
        total += 2 * sum(1 for s in config.sizes() if collective.layout(s, config.element_size, nranks).count)
    return total


def worker_environment() -> dict:
    env = dict(os.environ)
    root = _package_root()
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class BackendRun:
    """The workers of one backend on this machine: their result records, device lines, notes and fate."""

    def __init__(self, name: str):
        self.name, self.records, self.devices, self.notes = name, {}, {}, []
        self.status, self.reason = "ran", ""


def run_workers(config: BenchConfig, name: str, command: list[str], ranks: list[tuple[int, int]], nranks: int,
                rendezvous: str, progress) -> BackendRun:
    """Start one worker per (rank, device) in `ranks`, read their lines until all exit."""
    run = BackendRun(name)
    uid_file = os.path.join(rendezvous, f"{name}.uid")
    lines: queue.Queue = queue.Queue()
    procs, logs = {}, {}
    env = worker_environment()
    for rank, device in ranks:
        logs[rank] = tempfile.TemporaryFile(mode="w+")
        procs[rank] = subprocess.Popen(command + worker_arguments(config, name, rank, nranks, device, uid_file),
                                       stdout=subprocess.PIPE, stderr=logs[rank], text=True, env=env)
        run.records[rank] = []

        def read(rank=rank, stream=procs[rank].stdout):
            for line in stream:
                lines.put((rank, line))
            lines.put((rank, None))
        threading.Thread(target=read, daemon=True).start()
    open_streams, deadline = len(procs), time.monotonic() + config.timeout_s if config.timeout_s else None
    failed = None
    while open_streams:
        try:
            rank, line = lines.get(timeout=0.2)
        except queue.Empty:
            if deadline and time.monotonic() > deadline:
                failed = failed or f"timed out after {config.timeout_s} s (-T)"
                break
            dead = [r for r, p in procs.items() if p.poll() not in (None, 0)]
            if dead and failed is None:
                failed = f"rank {dead[0]} exited with status {procs[dead[0]].returncode}"
                time.sleep(1.0)  # its peers may be stuck in NCCL: give them a moment, then stop them
                break
            continue
        if line is None:
            open_streams -= 1
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a library printing on stdout: not ours
        event = record.get("event")
        if event == "result":
            run.records[rank].append(record)
            if rank == ranks[0][0]:
                progress.advance(f"{name} {record['collective']} {record['size']} B")
        elif event == "ready":
            run.devices[rank] = record
            run.notes += [n for n in record.get("notes", []) if n not in run.notes]
        elif event == "unsupported":
            run.status, run.reason = "unavailable", record.get("reason", "unsupported")
    for rank, proc in procs.items():
        if proc.poll() is None:
            if failed is None:
                try:
                    proc.wait(timeout=30)
                    continue
                except subprocess.TimeoutExpired:
                    failed = f"rank {rank} did not exit"
            proc.kill()
            proc.wait()
    if failed is None:
        bad = [r for r, p in procs.items() if p.returncode != 0]
        if bad:
            failed = f"rank {bad[0]} exited with status {procs[bad[0]].returncode}"
    if failed and run.status != "unavailable":
        run.status = "failed"
        tails = []
        for rank, log in logs.items():
            log.seek(0)
            text = log.read().strip()
            if text:
                tails.append(f"[rank {rank}] " + "\n".join(text.splitlines()[-12:]))
        run.reason = failed + ("\n" + "\n".join(tails) if tails else "")
    for log in logs.values():
        log.close()
    return run


def spawn_ranks(config: BenchConfig) -> tuple[list[tuple[int, int]], int]:
    if config.host_memory:
        if config.nthreads * max(config.ngpus, 1) != 1:
            raise BenchConfigError("--host-memory: one rank only (-g 1 -t 1): a stand-in libnccl moves data "
                                   "for one-rank communicators only")
        return [(0, 0)], 1
    gpus = visible_gpus()
    per = config.ngpus or gpus
    nranks = config.nthreads * per
    if nranks < 1:
        raise BenchConfigError("-g: no GPU is visible here (use -g N on a GPU machine, or --host-memory "
                               "with a stand-in libnccl)")
    if nranks > gpus:
        raise BenchConfigError(f"-t/-g: {nranks} ranks asked, {gpus} GPUs visible (one process per GPU)")
    return [(r, r) for r in range(nranks)], nranks


def launched_rendezvous(config: BenchConfig) -> str:
    if config.rendezvous:
        return config.rendezvous
    env = os.environ
    for var in ("TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_JOB_ID", "MASTER_PORT"):
        if env.get(var):
            # The launcher's process (torchrun's agent, mpirun's daemon) is every local rank's
            # parent and new each run, so a second run with the same job id starts clean.
            return os.path.join(tempfile.gettempdir(), f"ncclbind-bench-{env[var]}-{os.getppid()}")
    raise BenchConfigError("--rendezvous: under this launcher no job id names a shared directory; pass one")


def gather_launched(path_of, nranks: int, timeout_s: float) -> list[dict]:
    """Rank 0: every rank's results file for one backend."""
    deadline = time.monotonic() + timeout_s
    out = []
    for rank in range(nranks):
        path = path_of(rank)
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {rank} wrote no {path} in {timeout_s:.0f} s")
            time.sleep(0.05)
        with open(path) as f:
            out.append(json.load(f))
    return out


def collect(config: BenchConfig, progress_factory, on_backend=None) -> tuple[dict[str, BackendRun], int, bool]:
    """Run every backend; returns ({backend: BackendRun with every rank's records}, nranks,
    whether this process reports (rank 0 or the spawning driver)). on_backend(name, run, nranks),
    in the reporting process, as soon as a backend is done (so its tables show before the next)."""
    launched = launched_rank()
    runs: dict[str, BackendRun] = {}
    if launched is None:
        ranks, nranks = spawn_ranks(config)
        rendezvous = config.rendezvous or tempfile.mkdtemp(prefix="ncclbind-bench-")
        own_dir = config.rendezvous is None
    else:
        rank, nranks, local = launched
        ranks = [(rank, 0 if config.host_memory else local)]
        rendezvous = launched_rendezvous(config)
        os.makedirs(rendezvous, exist_ok=True)
        own_dir = False
    available = {name: availability(name, config) for name in config.backends}
    progress = progress_factory(expected_results(config, nranks) * sum(1 for c, _ in available.values() if c))
    try:
        for name, (command, reason) in available.items():
            if command is None:
                run = BackendRun(name)
                run.status, run.reason = "unavailable", reason
            else:
                run = run_workers(config, name, command, ranks, nranks, rendezvous, progress)
                if launched is not None:
                    path_of = lambda r, name=name: os.path.join(rendezvous, f"{name}.rank{r}.json")  # noqa: E731
                    mine = {"records": run.records.get(ranks[0][0], []), "device": run.devices.get(ranks[0][0], {}),
                            "status": run.status, "reason": run.reason, "notes": run.notes}
                    with open(path_of(ranks[0][0]) + ".tmp", "w") as f:
                        json.dump(mine, f)
                    os.replace(path_of(ranks[0][0]) + ".tmp", path_of(ranks[0][0]))
                    if ranks[0][0] == 0:
                        everyone = gather_launched(path_of, nranks, config.timeout_s or 3600)
                        run.records = {r: d["records"] for r, d in enumerate(everyone)}
                        run.devices = {r: d["device"] for r, d in enumerate(everyone) if d["device"]}
                        for r, d in enumerate(everyone):
                            if d["status"] != "ran" and run.status == "ran":
                                run.status, run.reason = d["status"], f"rank {r}: {d['reason']}"
            runs[name] = run
            if on_backend is not None and (launched is None or launched[0] == 0):
                on_backend(name, run, nranks)
    finally:
        progress.close()
        if own_dir:
            shutil.rmtree(rendezvous, ignore_errors=True)
    return runs, nranks, launched is None or launched[0] == 0
