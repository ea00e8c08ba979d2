"""The driver: for every backend, start one worker per rank (worker.py, or the C and Rust
programs of bench/cli/, which speak the same lines), gather their results, and aggregate
them over the ranks. Two ways to get ranks:

- spawn (default): this process starts `-t x -g` workers itself, one per GPU, sharing a
  fresh temporary rendezvous directory (unique ids as files, torch's FileStore);
- launched: under mpirun (OMPI_COMM_WORLD_RANK / PMI_RANK) or torchrun (RANK, WORLD_SIZE),
  each process is one rank and starts its own worker per backend; the ranks meet in
  --rendezvous (or a directory named after the job), where each writes its results and rank
  0 gathers them and prints.

After the backends, the latency pass: one worker per rank runs every Python backend that is
available in that one process, interleaved in rounds (worker.run_latency), over the sweep's
sizes up to --latency-max; the small-message goal is judged from it.

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
from .config import PYTHON_BACKENDS, BenchConfig, BenchConfigError

WORKER_BINARY = {"c": "ncclbind_bench_worker_c", "rust": "ncclbind_bench_worker"}
LATENCY = "latency"  # the latency pass's run (its rendezvous files, its progress label)


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
        from ..base.cuda import device_count
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
        for base in _checkouts():
            candidates.append(str(base / "bindings" / "rust" / "target" / "gpu" / WORKER_BINARY["rust"]))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return [path], ""
    if not explicit and name == "c":  # built here from the checkout's sources, where a compiler is
        source = next((base for base in _checkouts() if (base / C_WORKER_BUILD).is_file()), None)
        if source is not None:
            path, reason = build_c_worker(source)
            return ([path], "") if path else (None, reason)
    how = ("bench/cli/c/build.sh, then --c-worker or NCCLBIND_BENCH_C_WORKER (the bench builds it itself when it "
           "runs in a checkout with a C compiler)" if name == "c"
           else "bench/cli/rust/build.sh (where Rust is), then --rust-worker or NCCLBIND_BENCH_RUST_WORKER")
    where = f" ({', '.join(c for c in candidates if c)} is missing)" if any(candidates) else ""
    return None, f"no worker binary{where}: build it with {how}"


# The C worker's build script, relative to a checkout, and the sources it compiles.
C_WORKER_BUILD = pathlib.Path("bench", "cli", "c", "build.sh")
C_WORKER_SOURCES = ("bench/cli/c/bench_worker.c", "bench/cli/generated/collectives.h", "bindings/c/src/nccl.c",
                    "bindings/c/include/ncclbind/*.h", "runtime/src/*.c", "runtime/src/*.h", "runtime/src/generated/*.h", "runtime/include/ncclbind/*.h")


def _checkouts() -> list[pathlib.Path]:
    """Where a checkout may be: the one this package sits in (bindings/python/ncclbind), the
    working directory (the GPU sessions run from the repository root)."""
    return [pathlib.Path(_package_root()).parents[1], pathlib.Path.cwd()]


def build_c_worker(root: pathlib.Path) -> tuple[str | None, str]:
    """(the C worker built from `root`'s sources, "") or (None, why not). Built once per version of
    its sources with $CC (default gcc) by bench/cli/c/build.sh into $NCCLBIND_BENCH_CACHE (default
    ~/.cache/ncclbind/bench)/c-<sources' hash>/, then reused; a build is renamed into place, so
    ranks that build at once all end with one complete binary."""
    import hashlib
    compiler = os.environ.get("CC", "gcc")
    if shutil.which(compiler) is None:
        return None, f"no C worker binary, and no C compiler to build it ({compiler}; set CC)"
    digest = hashlib.sha256()
    for pattern in C_WORKER_SOURCES:
        for path in sorted(root.glob(pattern)):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    cache = pathlib.Path(os.environ.get("NCCLBIND_BENCH_CACHE") or pathlib.Path.home() / ".cache" / "ncclbind" / "bench")
    target = cache / f"c-{digest.hexdigest()[:16]}" / WORKER_BINARY["c"]
    if os.access(target, os.X_OK):
        return str(target), ""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as build:
            print(f"ncclbind.bench: building the C worker from {root} ({compiler})", file=sys.stderr, flush=True)
            done = subprocess.run(["bash", str(root / C_WORKER_BUILD), build], capture_output=True, text=True,
                                  timeout=300, env=dict(os.environ, CC=compiler))
            built = pathlib.Path(build) / WORKER_BINARY["c"]
            if done.returncode != 0 or not built.is_file():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                return None, f"the C worker did not build ({compiler}, exit {done.returncode}): {last}"
            os.replace(built, target)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"the C worker did not build: {error}"
    return str(target), ""


def worker_arguments(config: BenchConfig, name: str, rank: int, nranks: int, device: int, uid_file: str) -> list[str]:
    sizes = config.sizes()
    args = ["--backend", name, "--rank", str(rank), "--nranks", str(nranks), "--device", str(device),
            "--uid-file", uid_file, "--collectives", ",".join(config.collectives),
            "--sizes", ",".join(map(str, sizes)), "--iters", ",".join(str(config.iterations(s)) for s in sizes),
            "--warmups", f"{config.warmups(max(sizes))},{config.warmups(min(sizes))}",
            "--dtype", config.dtype, "--op", config.op, "--root", str(config.root), "--check", str(config.check),
            "--blocking", str(config.blocking), "--register", str(config.register)]
    return args + (["--host-memory"] if config.host_memory else [])


def latency_arguments(config: BenchConfig, backends: list[str], rank: int, nranks: int, device: int,
                      uid_file: str) -> list[str]:
    """The latency pass's worker: every backend in `backends` in one process, --latency-iters calls
    per size and round."""
    sizes = config.latency_sizes()
    args = worker_arguments(config, ",".join(backends), rank, nranks, device, uid_file)
    args[args.index("--sizes") + 1] = ",".join(map(str, sizes))
    args[args.index("--iters") + 1] = ",".join(str(config.latency_iters) for _ in sizes)
    return args + ["--latency-rounds", str(config.latency_rounds)]


def latency_backends(config: BenchConfig, available: dict) -> tuple[list[str], str]:
    """(the Python backends the latency pass runs, "") or ([], why it does not run)."""
    if not config.latency_sizes():
        return [], f"no size of the sweep is at most --latency-max ({config.latency_max} B)"
    names = [n for n in PYTHON_BACKENDS if n in config.backends and available.get(n, (None, ""))[0]]
    if not names:
        return [], "no Python backend is available"
    return names, ""


def expected_results(config: BenchConfig, nranks: int) -> int:
    """Result lines one rank prints for one backend (the progress bar's unit)."""
    total = 0
    for name in config.collectives:
        collective = COLLECTIVES[name]
        total += 2 * sum(1 for s in config.sizes() if collective.layout(s, config.element_size, nranks).count)
    return total


def expected_latency(config: BenchConfig, nranks: int, backends: int) -> int:
    """Latency lines one rank prints for `backends` backends."""
    return backends * sum(1 for name in config.collectives for s in config.latency_sizes()
                          if COLLECTIVES[name].layout(s, config.element_size, nranks).count)


def worker_environment() -> dict:
    env = dict(os.environ)
    root = _package_root()
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class BackendRun:
    """The workers of one backend (or of the latency pass) on this machine: their result records
    (latency records), device lines, notes, what they skipped, their fate and wall time."""

    def __init__(self, name: str):
        self.name, self.records, self.devices, self.notes = name, {}, {}, []
        self.latency, self.skipped = {}, []
        self.status, self.reason, self.seconds = "ran", "", 0.0


def run_workers(config: BenchConfig, name: str, command: list[str], ranks: list[tuple[int, int]], nranks: int,
                rendezvous: str, progress, arguments=None) -> BackendRun:
    """Start one worker per (rank, device) in `ranks`, read their lines until all exit.
    arguments(rank, device, uid_file): the worker's arguments (default: worker_arguments for `name`)."""
    run = BackendRun(name)
    started = time.monotonic()
    uid_file = os.path.join(rendezvous, f"{name}.uid")
    if arguments is None:
        arguments = lambda rank, device, uid: worker_arguments(config, name, rank, nranks, device, uid)  # noqa: E731
    lines: queue.Queue = queue.Queue()
    procs, logs = {}, {}
    env = worker_environment()
    for rank, device in ranks:
        logs[rank] = tempfile.TemporaryFile(mode="w+")
        procs[rank] = subprocess.Popen(command + arguments(rank, device, uid_file),
                                       stdout=subprocess.PIPE, stderr=logs[rank], text=True, env=env)
        run.records[rank] = []
        run.latency[rank] = []

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
        elif event == "latency":
            run.latency[rank].append(record)
            if rank == ranks[0][0]:
                progress.advance(f"{name} {record['backend']} {record['collective']} {record['size']} B")
        elif event == "skipped":
            entry = {k: record.get(k) for k in ("backend", "collective", "reason")}
            if entry not in run.skipped:
                run.skipped.append(entry)
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
    run.seconds = time.monotonic() - started
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


def collect(config: BenchConfig, progress_factory, on_backend=None,
            on_latency=None) -> tuple[dict[str, BackendRun], int, bool, BackendRun | None]:
    """Run every backend, then the latency pass; returns ({backend: BackendRun with every rank's
    records}, nranks, whether this process reports (rank 0 or the spawning driver), the latency
    pass's BackendRun: None when it did not run, its status "unavailable" and the reason when it
    could not). on_backend(name, run, nranks), in the reporting process, as soon as a backend is
    done (so its tables show before the next); on_latency(run, nranks) after the latency pass."""
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
    latency_names, latency_reason = latency_backends(config, available)
    progress = progress_factory(expected_results(config, nranks) * sum(1 for c, _ in available.values() if c)
                                + expected_latency(config, nranks, len(latency_names)))
    reporter = launched is None or launched[0] == 0

    def share(name: str, run: BackendRun) -> None:
        """Launched: every rank writes what it has, rank 0 gathers everyone's into `run`."""
        path_of = lambda r: os.path.join(rendezvous, f"{name}.rank{r}.json")  # noqa: E731
        me = ranks[0][0]
        mine = {"records": run.records.get(me, []), "latency": run.latency.get(me, []),
                "device": run.devices.get(me, {}), "status": run.status, "reason": run.reason, "notes": run.notes,
                "skipped": run.skipped}
        with open(path_of(me) + ".tmp", "w") as f:
            json.dump(mine, f)
        os.replace(path_of(me) + ".tmp", path_of(me))
        if me == 0:
            everyone = gather_launched(path_of, nranks, config.timeout_s or 3600)
            run.records = {r: d["records"] for r, d in enumerate(everyone)}
            run.latency = {r: d.get("latency", []) for r, d in enumerate(everyone)}
            run.devices = {r: d["device"] for r, d in enumerate(everyone) if d["device"]}
            for r, d in enumerate(everyone):
                if d["status"] != "ran" and run.status == "ran":
                    run.status, run.reason = d["status"], f"rank {r}: {d['reason']}"
                run.skipped += [s for s in d.get("skipped", []) if s not in run.skipped]

    latency = None
    try:
        for name, (command, reason) in available.items():
            if command is None:
                run = BackendRun(name)
                run.status, run.reason = "unavailable", reason
            else:
                run = run_workers(config, name, command, ranks, nranks, rendezvous, progress)
                if launched is not None:
                    share(name, run)
            runs[name] = run
            if on_backend is not None and reporter:
                on_backend(name, run, nranks)
        if config.latency_max > 0:
            latency = BackendRun(LATENCY)
            if not latency_names:
                latency.status, latency.reason = "unavailable", latency_reason
            else:
                command = available[latency_names[0]][0]  # the Python worker
                latency = run_workers(config, LATENCY, command, ranks, nranks, rendezvous, progress,
                                      lambda rank, device, uid: latency_arguments(config, latency_names, rank,
                                                                                  nranks, device, uid))
                if launched is not None:
                    share(LATENCY, latency)
            if on_latency is not None and reporter:
                on_latency(latency, nranks)
    finally:
        progress.close()
        if own_dir:
            shutil.rmtree(rendezvous, ignore_errors=True)
    return runs, nranks, reporter, latency
