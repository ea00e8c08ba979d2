"""The binding's own cost per all_reduce call, measured on a CPU against CuPy's binding over the
same library: no GPU, no CUDA, no NCCL work to blur it. The library is the tests' stand-in libnccl
(tests/python/fake_nccl.c, built here with the C compiler unless --fake-nccl names a built one; its
ncclAllReduce checks its arguments and copies 2 floats of host memory), so what is left is each
binding's call path.

    python3 bench/python/bench_binding_overhead_cpu.py [--iterations 200000] [--repeats 15] [--json out.json]
    python3 bench/python/bench_binding_overhead_cpu.py --instructions [--rows REGEX]   # under callgrind

Two measures:
- time (the default): ns per call, the best of --repeats, rows interleaved (each repeat takes every
  row in turn); it moves with the machine by tens of ns between runs;
- --instructions: instructions per call, counted by valgrind's callgrind (a run of --calls calls
  less a run of none, each row in its own process): the same on every run, so two builds, or two
  bindings, compare to the instruction. It is not time (a GIL hand-over's lock costs more time than
  its instruction count says), but the goal "at most CuPy's cost" can be judged on it without the
  GPU machine's noise.

Rows, each an out-of-place all-reduce of 2 float32 on stream 0:
  raw C            ncclAllReduce in a C loop through a plain function pointer
                   (bench/python/bench_loop.c, synchronize=False), without the GIL hand-over the
                   bindings' rows make
  cupy.cuda.nccl   CuPy's Cython binding (cupy_backends.cuda.libs.nccl, which cupy.cuda.nccl
                   re-exports) with raw pointers, from the pinned wheel `tools/setup.sh --bench`
                   installs into .cache/cupy (skipped without it); it hands the GIL over too
  generated        ncclbind._nccl.all_reduce with ints
  prepared         ncclbind.prepare(comm.all_reduce, a, b, stream=0)(): checked once, made in C
  method           Communicator.all_reduce(a, b) and (a, b, stream=0) on stand-ins for CuPy arrays
                   (tests/python/stand_ins.py; weakly referenceable, as CuPy's are, so cached);
                   also on NcclBuffer and on __cuda_array_interface__ objects (resolved each call)
  reference        Communicator.all_reduce.__wrapped__, the Python definition that runs when the
                   fast path declines
torch tensors are not here: their cost is torch's data_ptr() and numel(), C++ that only a real torch
has (bench_allreduce.py measures them on the GPU machine). The Python rows include their `for` loop
(~15 ns, ~160 instructions per call), as CuPy's does.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]
CUPY_SITE = ROOT / ".cache" / "cupy"  # tools/setup.sh --bench: the pinned cupy-cuda13x wheel
PATHFINDER_SITE = ROOT / ".cache" / "numba-cuda"  # cuda-pathfinder, which cupy_backends imports
RAW = "raw C ncclAllReduce loop"


def build_stand_in(directory: str) -> str:
    """The stand-in libnccl, with the soname libnccl.so.2: once ncclbind has loaded it, CuPy's module,
    which names libnccl.so.2 as a needed library, binds to the same one."""
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    import stand_ins
    return stand_ins.build_shared(pathlib.Path(directory) / "libnccl.so.2",
                                  ["-O1", "-fvisibility=hidden", "-Wl,-soname,libnccl.so.2",
                                   str(stand_ins.HERE / "fake_nccl.c")])


def make_rows(library: str) -> tuple[dict, dict, object]:
    """({row name: loop(count)}, {row name: why skipped}, the communicator), over `library`."""
    # Chosen once per process, before ncclbind loads anything; no CUDA device may contradict host
    # memory standing in for device memory.
    os.environ.update(NCCLBIND_NCCL_PATH=library, NCCLBIND_FAKE_NCCL_ACTIVE="1", CUDA_VISIBLE_DEVICES="",
                      NCCLBIND_CUDA_BACKEND="helper")
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    try:
        import ncclbind
    except ImportError:
        sys.path.insert(0, str(ROOT / "bindings" / "python"))  # an in-place build
        import ncclbind
    import numpy as np
    import stand_ins

    import ncclbind._nccl as low
    from ncclbind import NcclDataType, NcclRedOp

    cupy = stand_ins.install_cupy()
    comm = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())  # loads the library
    h = comm.handle
    x, y = np.ones(2, np.float32), np.zeros(2, np.float32)
    xp, yp = x.ctypes.data, y.ctypes.data
    rows, skipped = {}, {}

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import raw_loop
    raw_all_reduce = raw_loop.raw_all_reduce_loop()
    rows[RAW] = lambda count: raw_all_reduce(h, xp, yp, 2, 7, 0, count, False)

    try:
        sys.path[:0] = [str(CUPY_SITE), str(PATHFINDER_SITE)]
        from cupy_backends.cuda.libs import nccl as cupy_nccl
        ccomm = cupy_nccl.NcclCommunicator(1, cupy_nccl.get_unique_id(), 0)

        def cupy_raw(count, f=ccomm.allReduce, f32=cupy_nccl.NCCL_FLOAT32, ssum=cupy_nccl.NCCL_SUM):
            for _ in range(count):
                f(xp, yp, 2, f32, ssum, 0)
        rows["cupy.cuda.nccl allReduce (raw pointers)"] = cupy_raw
    except Exception as e:  # noqa: BLE001 - no wheel (set-up without --bench), another CuPy, ...
        skipped["cupy.cuda.nccl allReduce (raw pointers)"] = f"{e!r} (tools/setup.sh --bench installs it)"

    def generated(count, f=low.all_reduce, f32=NcclDataType.FLOAT32, ssum=NcclRedOp.SUM):
        for _ in range(count):
            f(xp, yp, 2, f32, ssum, h, 0)
    rows["ncclbind._nccl.all_reduce (generated)"] = generated

    a, b = cupy.ndarray([1, 2]), cupy.ndarray([0, 0])

    def prepared(count, call=ncclbind.prepare(comm.all_reduce, a, b, stream=0)):
        for _ in range(count):
            call()
    rows["prepare(comm.all_reduce, a, b, stream=0)()"] = prepared

    def method(count, f=comm.all_reduce):
        for _ in range(count):
            f(a, b)
    rows["comm.all_reduce(a, b) (CuPy-like)"] = method

    pairs = {"CuPy-like": (a, b),
             "NcclBuffer": (ncclbind.NcclBuffer(xp, 2, "float32", 0), ncclbind.NcclBuffer(yp, 2, "float32", 0)),
             "CAI": (stand_ins.DeviceArray(np.ones(2, np.float32)), stand_ins.DeviceArray(np.zeros(2, np.float32)))}
    for kind, (s, r) in pairs.items():
        def with_stream(count, s=s, r=r, f=comm.all_reduce):
            for _ in range(count):
                f(s, r, stream=0)
        rows[f"comm.all_reduce(a, b, stream=0) ({kind})"] = with_stream

    reference = getattr(type(comm).all_reduce, "__wrapped__", None)
    if reference is None:
        skipped["reference path"] = "this ncclbind's all_reduce has no Python definition behind a fast path"
    else:
        def resolving(count, f=reference, ssum=NcclRedOp.SUM, c=comm):
            for _ in range(count):
                f(c, a, b, ssum, stream=0)
        rows["  reference path (CuPy-like)"] = resolving

    for name, loop in list(rows.items()):
        try:
            loop(1000)  # warm-up: first-call resolution, caches
        except Exception as e:  # noqa: BLE001 - a row that cannot run is reported, not measured
            skipped[name] = repr(e)
            del rows[name]
    if y.tolist() != [1.0, 1.0]:
        sys.exit(f"the stand-in's all-reduce left {y.tolist()}: not a call of ncclAllReduce")
    return rows, skipped, comm


def keep(rows: dict, pattern: str | None) -> dict:
    """The rows whose name matches pattern, and the raw C row."""
    match = re.compile(pattern, re.IGNORECASE).search if pattern else None
    return {n: loop for n, loop in rows.items() if match is None or n == RAW or match(n)}


def timed(args, library: str) -> tuple[dict, dict]:
    rows, skipped, comm = make_rows(library)
    rows = keep(rows, args.rows)
    best = {name: float("inf") for name in rows}
    for _ in range(args.repeats):
        for name, loop in rows.items():
            t = time.perf_counter()
            loop(args.iterations)
            best[name] = min(best[name], (time.perf_counter() - t) / args.iterations)
    comm.destroy()
    return {name: seconds * 1e9 for name, seconds in best.items()}, skipped


def callgrind_total(out: str) -> int:
    """The instructions a callgrind output file counts (its `summary:` line)."""
    for line in pathlib.Path(out).read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"{out}: no summary line")


def counted(args, library: str, scratch: str) -> tuple[dict, dict]:
    """Instructions per call of each row: a child process per row and call count, under callgrind."""
    rows, skipped, comm = make_rows(library)  # the row names, and what is skipped here
    comm.destroy()
    names = list(keep(rows, args.rows))

    def run(name: str, calls: int) -> int:
        out = os.path.join(scratch, f"callgrind.{names.index(name)}.{calls}")
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                   os.path.abspath(__file__), "--fake-nccl", library, "--child", name, "--calls", str(calls)]
        # a fixed hash seed: with a random one, the start-up's own count moves by ~10^6 between runs
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"))
        if done.returncode:
            raise RuntimeError(f"{name}: {done.stderr[-2000:]}")
        return callgrind_total(out)

    jobs = [(name, calls) for name in names for calls in (0, args.calls)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        totals = dict(zip(jobs, pool.map(lambda job: run(*job), jobs)))
    return {name: (totals[name, args.calls] - totals[name, 0]) / args.calls for name in names}, skipped


def child(args, library: str) -> int:
    """One row's calls (after the warm-up every row has), for callgrind to count."""
    rows, _, comm = make_rows(library)
    rows[args.child](args.calls)
    comm.destroy()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200000, help="calls per row per repeat (time)")
    parser.add_argument("--repeats", type=int, default=15, help="repeats per row, interleaved (time)")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    parser.add_argument("--calls", type=int, default=20000, help="calls a row makes under callgrind (default 20000)")
    parser.add_argument("--rows", metavar="REGEX", help="only the rows whose name matches (and the raw C row)")
    parser.add_argument("--fake-nccl", help="a built stand-in libnccl with soname libnccl.so.2 (default: build one)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.iterations, args.repeats, args.calls + bool(args.child)) < 1:  # a child's baseline makes none
        parser.error("--iterations, --repeats and --calls must be positive")

    with tempfile.TemporaryDirectory(prefix="ncclbind-bench-") as scratch:
        library = os.path.abspath(args.fake_nccl or build_stand_in(scratch))
        if args.child:
            return child(args, library)
        if args.instructions:
            results, skipped = counted(args, library, scratch)
            unit, title = "instr/call", f"instructions per call under callgrind ({args.calls} calls less none)"
        else:
            results, skipped = timed(args, library)
            unit, title = "ns/call", f"{args.iterations} calls per row, best of {args.repeats}"

    raw = results.get(RAW, 0.0)
    print(f"2-float all-reduce, stand-in libnccl, {title} (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"{'':46} {unit:>10} {'+ vs raw C':>11}")
    for name, value in results.items():
        print(f"{name:46} {value:10.1f} {value - raw:11.1f}")
    for name, why in skipped.items():
        print(f"{name:46} skipped: {why}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"unit": unit, "per_call": results, "skipped": skipped}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
