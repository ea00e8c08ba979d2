"""Per-call host time of small collectives on a one-rank communicator, every way of
calling them side by side in one process: the raw C loop, the generated low-level
call, Communicator's methods on torch and on CuPy buffers (with each spelling of op
and stream users write), CuPy's cupy.cuda.nccl with raw pointers, torch.distributed
and nccl4py when they import; plus `import ncclbind` time in a fresh interpreter.

    NCCL_NVLS_ENABLE=0 python3 bench/python/bench_allreduce.py [--quick] [--rows REGEX] [--json out.json]
    python3 bench/python/bench_allreduce.py --list                     # the groups and rows
    python3 bench/python/bench_allreduce.py --rows "in place" --quick  # a group by its title, with its raw C row

Every row issues 2-float32 collectives on one stream (--stream: a non-blocking
stream from torch, or the legacy default stream). Rows come in groups, each
measured against its group's raw C row ("x raw C", "+us vs raw"):

- all_reduce out of place: bound by the GPU copy NCCL enqueues (~4.3 us on an
  H200), which hides the binding's cost;
- all_reduce in place: NCCL skips the copy, so this isolates the binding's cost;
  Communicator.all_reduce with op as NcclRedOp, str and int, stream as int,
  torch.cuda.Stream and CuPy Stream; torch.distributed (always in place);
- ncclbind.prepare rows: the same call checked and resolved once, then made in C each time
  (PreparedCall), on torch (and CuPy for all_reduce) buffers;
- broadcast, reduce in place; all_gather, reduce_scatter, gather, scatter with the
  in-place layout (one rank: the same buffer); all_to_all out of place; send/recv
  to self in a group.

Two figures per row: "enqueue", the host time of batches of --batch calls with
the synchronize after each batch left out (the binding's cost: the batch is short
enough not to fill CUDA's launch queue), and "incl. GPU", `iterations` calls and
one synchronize timed together. Every repeat takes each row in turn (interleaved);
best and median of --repeats are shown. "path" is where the row's Communicator
calls went during its warm-up (counted here through ncclbind._nccl._set_path_observer:
"C" made by the fast path, "Py" given to the Python definition). Goals: the low-level call within
1.3x of raw C; every Pythonic row's cost over raw C at most cupy.cuda.nccl's for
the same collective (all_reduce in place where CuPy has no counterpart); import
under 50 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 200
COUNT = 2  # float32 elements per call
OUT_OF_PLACE = "all_reduce, out of place (bound by NCCL's GPU copy)"
IN_PLACE = "all_reduce, in place (the binding's cost)"


def load_raw_loop():
    """The raw C loops (bench/python/bench_loop.c, built on first use)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import raw_loop
    return raw_loop


def import_time_ms(runs: int = 7) -> float:
    """Median wall time of `import ncclbind` in a fresh interpreter (after a warm-up run), from
    the same place this process imports it."""
    import ncclbind
    where = os.path.dirname(os.path.dirname(os.path.abspath(ncclbind.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (where, os.environ.get("PYTHONPATH")) if p))
    code = "import time; t = time.perf_counter(); import ncclbind; print(time.perf_counter() - t)"
    times = []
    for i in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        if i:
            times.append(float(out.stdout.strip()) * 1e3)
    return statistics.median(times)


def measure_once(loop, sync, iterations: int, batch: int) -> tuple[float, float]:
    """Seconds per call: (enqueue: host time of loop(batch) with each sync() left
    out, incl. GPU: loop(iterations) and sync() timed together)."""
    spent = 0.0
    batches = max(1, iterations // batch)
    for _ in range(batches):
        t = time.perf_counter()
        loop(batch)
        spent += time.perf_counter() - t
        sync()
    t = time.perf_counter()
    loop(iterations)
    sync()
    return spent / (batches * batch), (time.perf_counter() - t) / iterations


class PathCounts:
    """Where the fast-path methods' calls went while this is the extension's path observer
    (ncclbind._nccl._set_path_observer; the engine keeps no counts): {method: [made in C, given to
    Python]}. Installed around the warm-ups only: an observed call pays for a Python call."""

    def __init__(self):
        self.counts: dict[str, list[int]] = {}

    def __call__(self, method: str, made: bool) -> None:
        self.counts.setdefault(method, [0, 0])[0 if made else 1] += 1

    def __enter__(self):
        import ncclbind._nccl as low
        # an older build has no observer (pybenchab's "before" side): its paths are not counted
        self.install = getattr(low, "_set_path_observer", None)
        self.previous = self.install(self) if self.install else None
        return self

    def __exit__(self, *exc):
        if self.install:
            self.install(self.previous)

    def path(self) -> str:
        """"C 1000", "Py 1000", "C 900 Py 100", or "-" for no call of a fast-path method."""
        made = sum(c[0] for c in self.counts.values())
        given = sum(c[1] for c in self.counts.values())
        return " ".join(([f"C {made}"] if made else []) + ([f"Py {given}"] if given else [])) or "-"


TOTALS = PathCounts()  # every warm-up's calls, per method, for the report's last line


def repeat(fn, *args, op=None, stream=None):
    """A loop of fn(*args[, op=op], stream=stream) (stream only with keywords: every Communicator
    row passes one), or of fn(*args) with stream=None. The call is written out as a user writes
    it: a * or ** per call would cost about as much as some of the differences measured."""
    def shape():
        return len(args), op is not None, stream is not None
    if shape() == (0, False, False):
        def loop(count):
            for _ in range(count):
                fn()
    elif shape() == (1, False, True):
        a, = args
        def loop(count):
            for _ in range(count):
                fn(a, stream=stream)
    elif shape() == (1, True, True):
        a, = args
        def loop(count):
            for _ in range(count):
                fn(a, op=op, stream=stream)
    elif shape() == (2, False, True):
        a, b = args
        def loop(count):
            for _ in range(count):
                fn(a, b, stream=stream)
    elif shape() == (3, False, True):
        a, b, c = args
        def loop(count):
            for _ in range(count):
                fn(a, b, c, stream=stream)
    elif shape() == (4, False, True):
        a, b, c, d = args
        def loop(count):
            for _ in range(count):
                fn(a, b, c, d, stream=stream)
    elif shape() == (5, False, False):
        a, b, c, d, e = args
        def loop(count):
            for _ in range(count):
                fn(a, b, c, d, e)
    elif shape() == (6, False, False):
        a, b, c, d, e, f = args
        def loop(count):
            for _ in range(count):
                fn(a, b, c, d, e, f)
    elif shape() == (7, False, False):
        a, b, c, d, e, f, g = args
        def loop(count):
            for _ in range(count):
                fn(a, b, c, d, e, f, g)
    elif shape() == (8, False, False):
        a, b, c, d, e, f, g, h = args
        def loop(count):
            for _ in range(count):
                fn(a, b, c, d, e, f, g, h)
    else:
        raise ValueError(f"repeat: no loop written for {shape()} (add one)")
    return loop


class Rows:
    """Rows in groups, each group measured against its first row (its raw C loop).
    run() measures them together: every repeat takes each row in turn, so a drift
    of the machine over the run reaches every row alike."""

    def __init__(self):
        self.groups: dict[str, dict] = {}  # title -> {row name: loop}, the first row its raw C loop
        self.baseline: dict[str, str] = {}  # title -> its raw C row's name (kept if that row fails)
        self.skipped: dict[str, str] = {}  # row name -> reason
        self.paths: dict[str, str] = {}

    def group(self, title: str, baseline: str, loop) -> dict:
        """A new group of rows, measured against its first: baseline, a raw C loop."""
        self.baseline[title] = baseline
        self.groups[title] = {baseline: loop}
        return self.groups[title]

    def skip(self, name: str, reason) -> None:
        self.skipped[name] = f"skipped: {reason}"

    def names(self) -> list[str]:
        return [name for rows in self.groups.values() for name in rows]

    def keep(self, pattern: str | None) -> None:
        """Only the rows (or groups) whose name matches pattern, each with its group's raw C row."""
        if not pattern:
            return
        match = re.compile(pattern, re.IGNORECASE).search
        for title in list(self.groups):
            rows = self.groups[title]
            chosen = [n for n in rows if match(n) or match(title)]
            if not chosen:
                del self.groups[title]
                continue
            self.groups[title] = {n: rows[n] for n in rows if n == self.baseline[title] or n in chosen}
        self.skipped = {n: r for n, r in self.skipped.items() if match(n) or n.endswith(" rows") or n == "nccl4py"}

    def run(self, sync, iterations: int, repeats: int, batch: int) -> dict:
        """{row name: ([enqueue s/call per repeat], [incl. GPU s/call per repeat])}."""
        for title, rows in self.groups.items():
            for name, loop in list(rows.items()):
                observed = PathCounts()
                try:
                    with observed:
                        loop(min(iterations, 1000))  # warm-up: first-call resolution, caches, lazy init
                        sync()
                except Exception as e:  # noqa: BLE001 - a row that cannot run is reported, not measured
                    self.skip(name, repr(e))
                    del rows[name]
                    continue
                self.paths[name] = observed.path()
                for method, (made, given) in observed.counts.items():
                    total = TOTALS.counts.setdefault(method, [0, 0])
                    total[0] += made
                    total[1] += given
        times = {name: ([], []) for name in self.names()}
        for _ in range(repeats):
            for rows in self.groups.values():
                for name, loop in rows.items():
                    enqueue, total = measure_once(loop, sync, iterations, batch)
                    times[name][0].append(enqueue)
                    times[name][1].append(total)
        return times


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20000, help="calls per measurement (default 20000)")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per row, interleaved (default 5)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--stream", choices=("nonblocking", "legacy"), default="nonblocking")
    parser.add_argument("--batch", type=int, default=BATCH, help="calls per enqueue batch (default 200)")
    parser.add_argument("--rows", metavar="REGEX",
                        help="only rows (or groups) whose name matches, each with its group's raw C row")
    parser.add_argument("--quick", action="store_true",
                        help="a short run to see that every row works: 2000 calls, 2 repeats, one import timing")
    parser.add_argument("--list", action="store_true", help="print the row names and exit")
    parser.add_argument("--pin", type=int, metavar="CPU",
                        help="run the calling thread on this CPU only, once the communicator is up (NCCL's "
                             "own threads, started before, keep theirs): a thread that moves between "
                             "cores moves the figures by a tenth of a microsecond")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.repeats = min(args.iterations, 2000), min(args.repeats, 2)
    if args.iterations < 1 or args.repeats < 1 or args.batch < 1:
        parser.error("--iterations, --repeats and --batch must be positive")
    return args


class Setup:
    """The communicator, the buffers and streams each library spells, and the synchronize."""

    def __init__(self, args, rows: Rows):
        import ncclbind
        self.ncclbind = ncclbind
        self.comm = ncclbind.Communicator.init(1, 0, ncclbind.UniqueId.generate(), device=0)
        self.h = self.comm.handle
        try:
            import torch
        except ImportError as e:
            torch = None
            rows.skip("torch rows", e)
        try:
            import cupy
        except ImportError as e:
            cupy = None
            rows.skip("CuPy rows", e)
        self.torch, self.cupy = torch, cupy
        self.S, self.torch_stream, self.cupy_stream = 0, None, None
        if torch is not None:
            self.x = torch.ones(COUNT, device="cuda:0")
            self.y = torch.zeros(COUNT, device="cuda:0")
            self.sync = torch.cuda.synchronize
            self.sptr, self.rptr = self.x.data_ptr(), self.y.data_ptr()
            if args.stream == "nonblocking":
                self.torch_stream = torch.cuda.Stream(device=0)  # torch's pool streams are non-blocking
                self.S = self.torch_stream.cuda_stream
            else:
                self.torch_stream = torch.cuda.default_stream(0)
        else:
            import ncclbind.base.cuda as cuda
            self.blocks = [ncclbind.NcclMemoryResource(0).allocate(4 * COUNT) for _ in range(2)]
            self.sptr, self.rptr = self.blocks[0].ptr, self.blocks[1].ptr

            def sync():
                cuda.stream_synchronize(0)
            self.sync = sync
        if cupy is not None:
            self.cx = cupy.ones(COUNT, dtype=cupy.float32)
            self.cy = cupy.zeros(COUNT, dtype=cupy.float32)
            if args.stream == "legacy":
                self.cupy_stream = cupy.cuda.Stream.null
            elif torch is not None:  # the same stream as every other row, as a CuPy object
                self.cupy_stream = cupy.cuda.ExternalStream(self.S, 0)
            else:
                self.cupy_stream = cupy.cuda.Stream(non_blocking=True)
                self.S = self.cupy_stream.ptr

    def header(self, args, iterations, repeats) -> list[str]:
        ncclbind, torch, cupy = self.ncclbind, self.torch, self.cupy
        info = ncclbind.library_info("nccl")
        gpu = "GPU ?"
        try:
            if torch is not None:
                gpu = torch.cuda.get_device_name(0)
            elif cupy is not None:
                gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        except Exception as e:  # noqa: BLE001 - the header says what it could not learn
            gpu = f"GPU name unknown ({e!r})"
        try:
            import nccl.core as nccl4py
            n4p = f"nccl4py {nccl4py.__version__}"
        except Exception:  # noqa: BLE001
            n4p = "nccl4py absent"
        cpu = platform.processor() or platform.machine()
        return [
            f"one rank, {COUNT} float32, {args.stream} stream, batches of {args.batch}, {iterations} calls, "
            f"best/median of {repeats} interleaved repeats"
            + (f", calling thread on CPU {args.pin}" if args.pin is not None else ""),
            f"machine {platform.node()}: {gpu}, {os.cpu_count()} CPUs ({cpu}); NCCL {info.version} ({info.path}); "
            f"Python {sys.version.split()[0]}; "
            f"torch {getattr(torch, '__version__', 'absent')}"
            f"{' (CUDA ' + str(torch.version.cuda) + ')' if getattr(torch, 'version', None) else ''}; "
            f"CuPy {getattr(cupy, '__version__', 'absent')}; {n4p}",
        ]


def add_rows(rows: Rows, s: Setup) -> None:
    import ncclbind
    import ncclbind._nccl as low
    from ncclbind import NcclDataType, NcclRedOp
    raw_loop = load_raw_loop()
    raw_all_reduce = raw_loop.raw_all_reduce_loop()
    raw = raw_loop.raw_collective_loop()
    torch, cupy, comm, h, S = s.torch, s.cupy, s.comm, s.h, s.S
    sptr, rptr = s.sptr, s.rptr
    f32, ssum = NcclDataType.FLOAT32, NcclRedOp.SUM
    n = COUNT

    def raw_row(name, send, recv, **extra):
        args = (extra.get("op", 0), extra.get("root", 0), extra.get("send_peer", 0), extra.get("recv_peer", 0))
        return lambda count: raw(name, h, send, recv, n, int(f32), S, count, 0, *args)


    cupy_nccl = ccomm = None
    if cupy is not None:
        try:
            from cupy.cuda import nccl as cupy_nccl
            ccomm = cupy_nccl.NcclCommunicator(1, cupy_nccl.get_unique_id(), 0)
            cxp, cyp = s.cx.data.ptr, s.cy.data.ptr
        except Exception as e:  # noqa: BLE001 - CuPy built without NCCL, ...
            cupy_nccl = None
            rows.skip("cupy.cuda.nccl rows", repr(e))

    # all_reduce out of place: the rows of the first version of this benchmark (same names)
    g = rows.group(OUT_OF_PLACE, "raw C ncclAllReduce loop",
                   lambda count: raw_all_reduce(h, sptr, rptr, n, 7, S, count, False))
    g["ncclbind._nccl.all_reduce (generated)"] = repeat(low.all_reduce, sptr, rptr, n, f32, ssum, h, S)
    if torch is not None:
        g["Communicator.all_reduce (torch)"] = repeat(comm.all_reduce, s.x, s.y, stream=S)
    if cupy is not None:
        g["Communicator.all_reduce (CuPy)"] = repeat(comm.all_reduce, s.cx, s.cy, stream=S)
    if cupy_nccl is not None:
        g["cupy.cuda.nccl allReduce"] = repeat(ccomm.allReduce, cxp, cyp, n, cupy_nccl.NCCL_FLOAT32,
                                               cupy_nccl.NCCL_SUM, S)

    # all_reduce in place: NCCL skips the copy, so only the call's own cost is left
    g = rows.group(IN_PLACE, "raw C ncclAllReduce in place",
                   raw_row("all_reduce", sptr, sptr))
    if cupy_nccl is not None:
        g["cupy.cuda.nccl allReduce in place (raw pointers)"] = repeat(
            ccomm.allReduce, cxp, cxp, n, cupy_nccl.NCCL_FLOAT32, cupy_nccl.NCCL_SUM, S)
    g["_nccl.all_reduce in place"] = repeat(low.all_reduce, sptr, sptr, n, f32, ssum, h, S)
    if torch is not None:
        x, ts = s.x, s.torch_stream
        g["all_reduce(x, stream=int) torch"] = repeat(comm.all_reduce, x, stream=S)
        g["all_reduce(x, x, stream=int) torch"] = repeat(comm.all_reduce, x, x, stream=S)
        g["all_reduce(x, op=NcclRedOp.SUM, stream=int) torch"] = repeat(comm.all_reduce, x, op=ssum, stream=S)
        g["all_reduce(x, op='sum', stream=int) torch"] = repeat(comm.all_reduce, x, op="sum", stream=S)
        g["all_reduce(x, op=0, stream=int) torch"] = repeat(comm.all_reduce, x, op=0, stream=S)
        g["all_reduce(x, stream=torch.cuda.Stream) torch"] = repeat(comm.all_reduce, x, stream=ts)
        g["ncclbind.prepare(comm.all_reduce, x, stream=int)() torch"] = repeat(
            ncclbind.prepare(comm.all_reduce, x, stream=S))
        g["all_reduce(x, op=NcclRedOp.SUM, stream=torch.cuda.Stream) torch"] = repeat(
            comm.all_reduce, x, op=ssum, stream=ts)
    if cupy is not None:
        cx, cs = s.cx, s.cupy_stream
        g["all_reduce(x, stream=int) CuPy"] = repeat(comm.all_reduce, cx, stream=S)
        g["all_reduce(x, op=NcclRedOp.SUM, stream=cupy Stream) CuPy"] = repeat(
            comm.all_reduce, cx, op=ssum, stream=cs)
        g["all_reduce(x, stream=cupy Stream) CuPy"] = repeat(comm.all_reduce, cx, stream=cs)
        g["ncclbind.prepare(comm.all_reduce, x, stream=int)() CuPy"] = repeat(
            ncclbind.prepare(comm.all_reduce, cx, stream=S))
    add_torch_distributed(rows, g, s)
    add_nccl4py(rows, s, low)

    # the other collectives on one rank, in place where NCCL allows it
    buffers = []
    if torch is not None:
        buffers.append(("torch", s.x, s.y))
    if cupy is not None:
        buffers.append(("CuPy", s.cx, s.cy))
    cupy_calls = {}
    if cupy_nccl is not None:
        t, csum = cupy_nccl.NCCL_FLOAT32, cupy_nccl.NCCL_SUM
        cupy_calls = {
            "broadcast": lambda: repeat(ccomm.broadcast, cxp, cxp, n, t, 0, S),
            "reduce": lambda: repeat(ccomm.reduce, cxp, cxp, n, t, csum, 0, S),
            "all_gather": lambda: repeat(ccomm.allGather, cxp, cxp, n, t, S),
            "reduce_scatter": lambda: repeat(ccomm.reduceScatter, cxp, cxp, n, t, csum, S),
        }
    collectives = (  # method, how, low-level arguments after (send, recv, count), raw C extras, Pythonic arguments
        ("broadcast", "in place", (f32, 0), {"root": 0}, lambda a, b: (a, a, 0)),
        ("reduce", "in place", (f32, ssum, 0), {"root": 0}, lambda a, b: (a, a, ncclbind.NcclRedOp.SUM, 0)),
        ("all_gather", "in-place layout", (f32,), {}, lambda a, b: (a, a)),
        ("reduce_scatter", "in-place layout", (f32, ssum), {}, lambda a, b: (a, a)),
        ("gather", "in-place layout", (f32, 0), {"root": 0}, lambda a, b: (a, a, 0)),
        ("scatter", "in-place layout", (f32, 0), {"root": 0}, lambda a, b: (a, a, 0)),
        ("all_to_all", "out of place", (f32,), {}, lambda a, b: (a, b)),
    )
    for method, how, low_args, extras, pythonic in collectives:
        recv = rptr if how == "out of place" else sptr
        g = rows.group(f"{method}, {how}", f"raw C {method} {how}", raw_row(method, sptr, recv, **extras))
        if method in cupy_calls:
            g[f"cupy.cuda.nccl {method} {how} (raw pointers)"] = cupy_calls[method]()
        g[f"_nccl.{method} {how}"] = repeat(getattr(low, method), sptr, recv, n, *low_args, h, S)
        for lib, a, b in buffers:
            g[f"Communicator.{method} {how} {lib}"] = repeat(getattr(comm, method), *pythonic(a, b), stream=S)
        for lib, a, b in buffers[:1]:
            g[f"ncclbind.prepare(comm.{method}, ...)() {how} {lib}"] = repeat(
                ncclbind.prepare(getattr(comm, method), *pythonic(a, b), stream=S))

    # send/recv to self in a group
    g = rows.group("send/recv to self in a group", "raw C group(ncclSend, ncclRecv)",
                   raw_row("send_recv", sptr, rptr))

    def low_send_recv(count):
        start, end, send, recv = low.group_start, low.group_end, low.send, low.recv
        for _ in range(count):
            start()
            send(sptr, n, f32, 0, h, S)
            recv(rptr, n, f32, 0, h, S)
            end()
    if cupy_nccl is not None:
        def cupy_send_recv(count):
            start, end, send, recv, t = cupy_nccl.groupStart, cupy_nccl.groupEnd, ccomm.send, ccomm.recv, \
                cupy_nccl.NCCL_FLOAT32
            for _ in range(count):
                start()
                send(cxp, n, t, 0, S)
                recv(cyp, n, t, 0, S)
                end()
        g["cupy.cuda.nccl group(send, recv) (raw pointers)"] = cupy_send_recv
    g["_nccl group_start, send, recv, group_end"] = low_send_recv
    for lib, a, b in buffers:
        def send_recv(count, a=a, b=b):
            group, send, recv = s.ncclbind.group, comm.send, comm.recv
            for _ in range(count):
                with group():
                    send(a, 0, stream=S)
                    recv(b, 0, stream=S)
        g[f"with group(): Communicator.send, recv {lib}"] = send_recv


def add_torch_distributed(rows: Rows, g: dict, s: Setup) -> None:
    name = "torch.distributed.all_reduce (in place)"
    if s.torch is None:
        return rows.skip(name, "torch absent")
    torch = s.torch
    try:
        import torch.distributed as dist
        if not dist.is_initialized():
            torch.cuda.set_device(0)
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        tx = torch.ones(COUNT, device="cuda:0")
    except Exception as e:  # noqa: BLE001 - no NCCL backend, no GPU, ...
        return rows.skip(name, repr(e))

    def torch_loop(count):
        ar = dist.all_reduce
        with torch.cuda.stream(s.torch_stream) if s.torch_stream is not None else _nothing():
            for _ in range(count):
                ar(tx)
    g[name] = torch_loop


def add_nccl4py(rows: Rows, s: Setup, low) -> None:
    try:
        import nccl.core as nccl4py  # nccl4py's Pythonic module (0.6.0: Communicator.allreduce)
        from nccl.bindings import nccl as nccl4py_low  # its generated low level
        if s.torch is None:
            raise RuntimeError("needs torch buffers here")
        ncomm = nccl4py.Communicator.init(1, 0, nccl4py.get_unique_id())
    except Exception as e:  # noqa: BLE001
        return rows.skip("nccl4py", repr(e))
    n4p_sum, v, x, y, S = nccl4py.SUM, nccl4py.__version__, s.x, s.y, s.S
    sptr, rptr = s.sptr, s.rptr

    def low_loop(send, recv):
        def loop(count):
            f, c = nccl4py_low.all_reduce, ncomm._comm  # its low level takes its Comm object
            for _ in range(count):
                f(send, recv, COUNT, 7, 0, c, S)
        return loop

    def comm_loop(send, recv):
        def loop(count):
            ar = ncomm.allreduce
            for _ in range(count):
                ar(send, recv, n4p_sum, stream=S)
        return loop
    out, inplace = rows.groups[OUT_OF_PLACE], \
        rows.groups[IN_PLACE]
    out[f"nccl4py {v} low-level all_reduce"] = low_loop(sptr, rptr)
    out[f"nccl4py {v} Communicator.allreduce (torch)"] = comm_loop(x, y)
    inplace[f"nccl4py {v} low-level all_reduce in place"] = low_loop(sptr, sptr)
    inplace[f"nccl4py {v} Communicator.allreduce in place (torch)"] = comm_loop(x, x)


def goals_of(rows: Rows, best: dict, import_ms: float | None) -> dict:
    """{goal: met}, for the goals the measured rows can judge."""
    goals = {}

    def raw(title):
        return best.get(rows.baseline.get(title))
    for title, low_name in ((OUT_OF_PLACE, "ncclbind._nccl.all_reduce (generated)"),
                            (IN_PLACE, "_nccl.all_reduce in place")):
        if low_name in best and raw(title):
            goals[f"{low_name} within 1.3x raw C"] = best[low_name] / raw(title) <= 1.3

    def cupy_row(title):
        return next((n for n in rows.groups.get(title, ()) if n.startswith("cupy.cuda.nccl") and n in best), None)
    for title, members in rows.groups.items():
        against = cupy_row(title) if title != OUT_OF_PLACE else None
        reference = title
        if title != OUT_OF_PLACE and against is None and cupy_row(IN_PLACE):
            against, reference = cupy_row(IN_PLACE), IN_PLACE  # CuPy has no such call: its all_reduce's cost
        if against is None or raw(title) is None or raw(reference) is None:
            continue
        allowed = best[against] - raw(reference)
        for name in members:
            pythonic = "Communicator" in name or name.startswith(("all_reduce(", "with group()"))
            if pythonic and name in best:
                goals[f"{name}: over raw C at most {against}'s"] = best[name] - raw(title) <= allowed
    if import_ms is not None:
        goals["import under 50 ms"] = import_ms < 50
    return goals


def main(argv=None) -> int:
    args = parse_args(argv)
    import_ms = None if args.list else import_time_ms(1 if args.quick else 7)
    rows = Rows()
    s = Setup(args, rows)
    add_rows(rows, s)
    if args.list:
        print("\n".join(f"{title}: {name}" for title, g in rows.groups.items() for name in g))
        s.comm.destroy()
        return 0
    rows.keep(args.rows)
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})  # Linux: pid 0 is the calling thread alone
    if not rows.groups:
        print(f"no row matches --rows {args.rows!r} (see --list)", file=sys.stderr)
        s.comm.destroy()
        return 2
    times = rows.run(s.sync, args.iterations, args.repeats, args.batch)
    best = {name: min(t[0]) for name, t in times.items()}

    for line in s.header(args, args.iterations, args.repeats):
        print(line)
    width = max([44] + [len(n) for n in times]) + 1
    print(f"{'':{width}} {'enqueue us':>10} {'median':>8} {'x raw C':>8} {'+us vs raw':>10} "
          f"{'incl. GPU us':>12}  path")
    results: dict[str, float | str] = {}
    for title, members in rows.groups.items():
        baseline = rows.baseline[title]
        raw_us = best[baseline] * 1e6 if baseline in best else None
        print(f"-- {title} (against {baseline}{'' if raw_us else ', which did not run'})")
        for name in members:
            enqueue, total = times[name]
            us, med, gpu = min(enqueue) * 1e6, statistics.median(enqueue) * 1e6, min(total) * 1e6
            results[f"{name} (enqueue us/call)"] = us
            results[f"{name} (median enqueue us/call)"] = med
            results[f"{name} (incl. GPU us/call)"] = gpu
            ratio = f"{us / raw_us:8.2f} {us - raw_us:10.3f}" if raw_us else f"{'-':>8} {'-':>10}"
            print(f"{name:{width}} {us:10.3f} {med:8.3f} {ratio} {gpu:12.3f}  {rows.paths.get(name, '-')}")
    for name, reason in rows.skipped.items():
        results[name] = reason
        print(f"{name:{width}} {reason}")
    if import_ms is not None:
        results["import ncclbind (ms)"] = import_ms
        print(f"{'import ncclbind':{width}} {import_ms:9.2f} ms")
    counts = TOTALS.counts
    print("fast path (the warm-ups' calls, made in C / given to Python): " + (", ".join(
        f"{m} {made}/{given}" for m, (made, given) in sorted(counts.items()) if made or given) or "no calls"))
    goals = goals_of(rows, best, import_ms)
    for goal, met in goals.items():
        print(f"goal {'met' if met else 'MISSED'}: {goal}")
    s.comm.destroy()
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"header": s.header(args, args.iterations, args.repeats), "rows": results,
                       "paths": rows.paths, "warmup_paths": {m: list(c) for m, c in counts.items()},
                       "goals": goals}, out, indent=1)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    sys.exit(main())
