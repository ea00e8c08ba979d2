"""BenchConfig: what one `python -m ncclbind.bench` run measures, parsed from nccl-tests'
flags (same letters, long names and defaults as its *_perf programs) plus this tool's own
(backends, collectives, JSON and plot paths, launcher settings)."""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import stat

from ._generated import collectives as _collectives
from .._generated.vocabulary import DATA_TYPES
from ..command_line import CommandLineError, OneLineParser

# nccl-tests' -d names, in NCCL's ncclDataType_t order, and the other spellings of those types:
# from policy/vocabulary.toml (the types nccl-tests has).
DTYPES = {  # name: (ncclDataType_t value, bytes per element, NumPy/torch-style name)
    nccl_tests: (value, size, name) for value, name, size, _, nccl_tests, _, _ in DATA_TYPES if nccl_tests}
DTYPE_ALIASES = {spelling: nccl_tests for _, name, _, aliases, nccl_tests, _, _ in DATA_TYPES if nccl_tests
                 for spelling in (name, *aliases) if spelling != nccl_tests}
OPS = _collectives.OPS  # nccl-tests' -o names -> ncclRedOp_t values, from the headers
AVERAGE_MODES = {0: "rank 0", 1: "average", 2: "minimum", 3: "maximum"}  # -a
REGISTER_MODES = {0: "none", 1: "local (ncclCommRegister)", 2: "symmetric (ncclCommWindowRegister)"}  # -R

COLLECTIVE_NAMES = tuple(_collectives.COLLECTIVES)  # policy/vocabulary.toml [collectives]
BACKEND_NAMES = ("ncclbind", "rust", "c", "torch", "cupy", "nccl4py")
PYTHON_BACKENDS = ("ncclbind", "torch", "cupy", "nccl4py")  # the latency goal's field; worker.py runs them


class BenchConfigError(ValueError):
    """A flag with a value nccl-tests (or this tool) does not accept; the message names the flag."""


# Bounds that keep a mistyped flag from running for ever or allocating the machine away: a size
# above MAX_BYTES (1 TiB per buffer) or a sweep of more than MAX_SIZES sizes is refused up front.
MAX_BYTES = 1 << 40
MAX_SIZES = 4096


def parse_size(text: str, flag: str) -> int:
    """nccl-tests' sizes: a number, optionally with K, M or G (powers of 1024), e.g. 8, 128M, 1.5K;
    at most MAX_BYTES."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgG]?)\s*", str(text))
    if not match:
        raise BenchConfigError(f"{flag}: {text!r} is not a size (a number with an optional K, M or G)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    value = float(match.group(1)) * scale
    if not math.isfinite(value) or value > MAX_BYTES:
        raise BenchConfigError(f"{flag}: {text!r} is more than {MAX_BYTES >> 30} GiB")
    return int(value)


def check_output_path(path: str | None, flag: str) -> None:
    """An output file the run will write at its end, checked before any work: its folder exists
    and is writable, and the path is not a folder, a FIFO or a device (a FIFO would block)."""
    if path is None:
        return
    if not isinstance(path, str) or not path:
        raise BenchConfigError(f"{flag}: expected a file path, not {path!r}")
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise BenchConfigError(f"{flag}: {path}: the folder {folder} does not exist")
    if os.path.lexists(target):
        mode = os.stat(target).st_mode if os.path.exists(target) else 0
        if not stat.S_ISREG(mode):
            kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a dangling link" if not mode else "not a regular file")
            raise BenchConfigError(f"{flag}: {path} is {kind}; give a file to write")
        if not os.access(target, os.W_OK):
            raise BenchConfigError(f"{flag}: {path} is not writable")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise BenchConfigError(f"{flag}: {path}: the folder {folder} is not writable")


@dataclasses.dataclass
class BenchConfig:
    """Everything one run measures. Sizes follow nccl-tests: from min_bytes, times step_factor
    when it is above 1, else plus step_bytes, while at most max_bytes."""
    min_bytes: int = 32 << 20
    max_bytes: int = 32 << 20
    step_bytes: int = 1 << 20
    step_factor: int = 1
    iters: int = 20
    warmup_iters: int = 5
    check: int = 1
    dtype: str = "float"
    op: str = "sum"
    root: int = 0
    average: int = 1
    blocking: int = 0
    register: int = 0
    nthreads: int = 1
    ngpus: int = 1
    timeout_s: int = 0
    collectives: tuple = ("all_reduce",)
    backends: tuple = BACKEND_NAMES
    json_path: str | None = None
    plot_path: str | None = None
    iter_bytes_cap: int = 0      # 0: -n iterations at every size; else at most cap/size (>= 1) per size
    progress: str = "auto"       # auto (a tty), always, never
    host_memory: bool = False    # buffers in host memory: only for a stand-in libnccl on a CPU machine
    rendezvous: str | None = None
    c_worker: str | None = None
    rust_worker: str | None = None
    latency_max: int = 1 << 10   # the latency pass: the sweep's sizes up to this (0: no latency pass)
    latency_iters: int = 1000    # calls per backend, size and round (timed in batches: worker.latency_batches)
    latency_rounds: int = 10

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        if self.min_bytes < 0 or self.max_bytes < 0:
            raise BenchConfigError("-b/-e: sizes must not be negative")
        if self.min_bytes > self.max_bytes:
            raise BenchConfigError(f"-b/-e: minbytes {self.min_bytes} is larger than maxbytes {self.max_bytes}")
        if self.step_factor < 1:
            raise BenchConfigError(f"-f: stepfactor must be >= 1, not {self.step_factor}")
        if self.step_factor <= 1 and self.step_bytes <= 0 and self.min_bytes != self.max_bytes:
            raise BenchConfigError("-i: stepbytes must be > 0 when -f is not above 1 (the sweep would never end)")
        for flag, value, low in (("-n", self.iters, 1), ("-w", self.warmup_iters, 0), ("-c", self.check, 0),
                                 ("-t", self.nthreads, 1), ("-g", self.ngpus, 0), ("-T", self.timeout_s, 0),
                                 ("--latency-iters", self.latency_iters, 1),
                                 ("--latency-rounds", self.latency_rounds, 1)):
            if not isinstance(value, int) or value < low:
                raise BenchConfigError(f"{flag}: expected an integer >= {low}, not {value!r}")
        if self.dtype not in DTYPES:
            raise BenchConfigError(f"-d: unknown datatype {self.dtype!r} (one of {', '.join(DTYPES)})")
        if self.op not in OPS:
            raise BenchConfigError(f"-o: unknown op {self.op!r} (one of {', '.join(OPS)})")
        if self.average not in AVERAGE_MODES:
            raise BenchConfigError(f"-a: expected 0 (rank 0), 1 (avg), 2 (min) or 3 (max), not {self.average!r}")
        if self.register not in REGISTER_MODES:
            raise BenchConfigError(f"-R: expected 0, 1 (local) or 2 (symmetric), not {self.register!r}")
        if self.blocking not in (0, 1):
            raise BenchConfigError(f"-z: expected 0 or 1, not {self.blocking!r}")
        if self.root < 0:
            raise BenchConfigError(f"-r: root must be >= 0, not {self.root}")
        for name in self.collectives:
            if name not in COLLECTIVE_NAMES:
                raise BenchConfigError(f"--collectives: unknown collective {name!r} (one of {', '.join(COLLECTIVE_NAMES)})")
        for name in self.backends:
            if name not in BACKEND_NAMES:
                raise BenchConfigError(f"--backends: unknown backend {name!r} (one of {', '.join(BACKEND_NAMES)})")
        if not self.collectives or not self.backends:
            raise BenchConfigError("--collectives/--backends: at least one each")
        if self.latency_max < 0:
            raise BenchConfigError(f"--latency-max: a size >= 0 (0: no latency pass), not {self.latency_max}")
        if self.progress not in ("auto", "always", "never"):
            raise BenchConfigError(f"--progress: auto, always or never, not {self.progress!r}")
        for flag, value in (("-b", self.min_bytes), ("-e", self.max_bytes), ("-i", self.step_bytes),
                            ("--latency-max", self.latency_max)):
            if value > MAX_BYTES:
                raise BenchConfigError(f"{flag}: {value} bytes is more than {MAX_BYTES >> 30} GiB")
        count = self.size_count()
        if count > MAX_SIZES:
            raise BenchConfigError(f"-b/-e/-i/-f: the sweep has {count} sizes, more than {MAX_SIZES} "
                                   "(raise -i or use -f)")

    def size_count(self) -> int:
        """How many sizes sizes() walks, counted without walking them."""
        if self.min_bytes > self.max_bytes:
            return 0
        if self.step_factor > 1:
            if self.min_bytes == 0:
                return 1
            count, size = 0, self.min_bytes
            while size <= self.max_bytes:  # at most log2(MAX_BYTES) steps
                count, size = count + 1, size * self.step_factor
            return count
        if self.step_bytes <= 0:
            return 1
        return (self.max_bytes - self.min_bytes) // self.step_bytes + 1

    @property
    def element_size(self) -> int:
        return DTYPES[self.dtype][1]

    def sizes(self) -> list[int]:
        """The sweep, as nccl-tests walks it (each size in bytes, before a collective's layout)."""
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            if self.step_factor > 1:
                if size == 0:
                    break
                size *= self.step_factor
            else:
                if self.step_bytes <= 0:
                    break
                size += self.step_bytes
        return out

    def latency_sizes(self) -> list[int]:
        """The sizes of the latency pass: the sweep's, from 1 byte up to --latency-max."""
        return [s for s in self.sizes() if 0 < s <= self.latency_max]

    def iterations(self, nbytes: int) -> int:
        """Timed iterations at one size: -n, or fewer when --iter-bytes-cap bounds iterations x size.
        The same for every rank and backend (it depends on nothing measured)."""
        if self.iter_bytes_cap <= 0 or nbytes == 0:
            return self.iters
        return max(1, min(self.iters, self.iter_bytes_cap // nbytes))

    def warmups(self, nbytes: int) -> int:
        if self.iter_bytes_cap <= 0 or nbytes == 0:
            return self.warmup_iters
        return min(self.warmup_iters, max(1, self.iter_bytes_cap // nbytes))

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict) -> BenchConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in fields})


def _int(flag):
    def convert(text):
        try:
            return int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} is not an integer") from None
    return convert


def _names(text: str) -> tuple:
    return tuple(n.strip().replace("-", "_") for n in text.split(",") if n.strip())


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="ncclbind-bench",
        description="nccl-tests' tables for ncclbind (Python, Rust, C) next to torch.distributed, CuPy and "
                    "nccl4py. Flags as in nccl-tests' *_perf programs; see docs/bench.md.")
    p.add_argument("-t", "--nthreads", type=_int("-t"), default=1,
                   help="nccl-tests' threads per process; here each rank is a process: ranks = t x g")
    p.add_argument("-g", "--ngpus", type=_int("-g"), default=1,
                   help="GPUs (ranks) to start, one process each (0: every visible GPU); default 1")
    p.add_argument("-b", "--minbytes", default="32M", help="smallest size (default 32M)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    p.add_argument("-i", "--stepbytes", default="1M", help="fixed increment between sizes (default 1M)")
    p.add_argument("-f", "--stepfactor", type=_int("-f"), default=1,
                   help="multiplication factor between sizes (default: disabled)")
    p.add_argument("-n", "--iters", type=_int("-n"), default=20, help="timed iterations (default 20)")
    p.add_argument("-w", "--warmup_iters", type=_int("-w"), default=5, help="warm-up iterations (default 5)")
    p.add_argument("-c", "--check", type=_int("-c"), default=1, help="check iterations per size (default 1; 0: none)")
    p.add_argument("-d", "--datatype", default="float", help="datatype (default float)")
    p.add_argument("-o", "--op", default="sum", help="reduction op: sum, prod, max, min, avg (default sum)")
    p.add_argument("-r", "--root", type=_int("-r"), default=0, help="root of broadcast and reduce (default 0)")
    p.add_argument("-a", "--average", type=_int("-a"), default=1,
                   help="time across ranks: 0 rank 0, 1 average, 2 min, 3 max (default 1)")
    p.add_argument("-z", "--blocking", type=_int("-z"), default=0,
                   help="1: synchronize and barrier after every collective (default 0)")
    p.add_argument("-R", "--local_register", type=_int("-R"), default=0,
                   help="buffers in ncclMemAlloc memory, registered: 1 local, 2 symmetric window (default 0)")
    p.add_argument("-T", "--timeout", type=_int("-T"), default=0, help="seconds per backend run (default: none)")
    p.add_argument("-J", "--output_file", default=None, help="write the results as JSON to this file")
    p.add_argument("--plot", default=None, help="write a PNG of busbw and time against size, a line per backend")
    p.add_argument("--collectives", default="all_reduce",
                   help=f"comma-separated, from {', '.join(COLLECTIVE_NAMES)} (default all_reduce)")
    p.add_argument("--backends", default=",".join(BACKEND_NAMES),
                   help=f"comma-separated, from {', '.join(BACKEND_NAMES)} (default all; missing ones are reported)")
    p.add_argument("--iter-bytes-cap", default="0",
                   help="at most this many bytes x iterations per size (e.g. 8G), so large sizes take fewer; 0: -n")
    p.add_argument("--latency-max", default="1K",
                   help="the latency pass (every Python backend in one process per rank, interleaved in rounds) "
                        "covers the sweep's sizes up to this (default 1K; 0: no latency pass)")
    p.add_argument("--latency-iters", type=_int("--latency-iters"), default=1000,
                   help="latency pass: calls per backend, size and round (default 1000)")
    p.add_argument("--latency-rounds", type=_int("--latency-rounds"), default=10,
                   help="latency pass: rounds; the table shows the median round and the range (default 10)")
    p.add_argument("--progress", default="auto", choices=("auto", "always", "never"),
                   help="progress bar on stderr: auto (when stderr is a tty), always, never")
    p.add_argument("--host-memory", action="store_true",
                   help="host buffers, for a stand-in libnccl on a CPU machine (tests); not a GPU measurement")
    p.add_argument("--rendezvous", default=None,
                   help="directory the ranks share for unique ids and results (default: a fresh temporary one; "
                        "under mpirun/torchrun one derived from the job)")
    p.add_argument("--c-worker", default=None, help="the C worker binary (default: $NCCLBIND_BENCH_C_WORKER)")
    p.add_argument("--rust-worker", default=None,
                   help="the Rust worker binary (default: $NCCLBIND_BENCH_RUST_WORKER, else "
                        "bindings/rust/target/gpu/ncclbind_bench_worker)")
    return p


def parse_args(argv=None) -> BenchConfig:
    """BenchConfig from a command line; BenchConfigError names the flag that is wrong."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CommandLineError as e:
        raise BenchConfigError(str(e)) from None
    dtype = DTYPE_ALIASES.get(args.datatype, args.datatype)
    if dtype == "all" or args.op == "all":
        raise BenchConfigError("-d/-o: 'all' is not supported here; run once per datatype or op")
    check_output_path(args.output_file, "-J")  # here, not in validate(): a worker rebuilds the config elsewhere
    check_output_path(args.plot, "--plot")
    return BenchConfig(
        min_bytes=parse_size(args.minbytes, "-b"), max_bytes=parse_size(args.maxbytes, "-e"),
        step_bytes=parse_size(args.stepbytes, "-i"), step_factor=args.stepfactor, iters=args.iters,
        warmup_iters=args.warmup_iters, check=args.check, dtype=dtype, op=args.op, root=args.root,
        average=args.average, blocking=args.blocking, register=args.local_register, nthreads=args.nthreads,
        ngpus=args.ngpus, timeout_s=args.timeout, collectives=_names(args.collectives),
        backends=_names(args.backends), json_path=args.output_file, plot_path=args.plot,
        iter_bytes_cap=parse_size(args.iter_bytes_cap, "--iter-bytes-cap"), progress=args.progress,
        host_memory=args.host_memory, rendezvous=args.rendezvous,
        latency_max=parse_size(args.latency_max, "--latency-max"), latency_iters=args.latency_iters,
        latency_rounds=args.latency_rounds,
        c_worker=args.c_worker or os.environ.get("NCCLBIND_BENCH_C_WORKER"),
        rust_worker=args.rust_worker or os.environ.get("NCCLBIND_BENCH_RUST_WORKER"))
