"""Per-call time of a 2-float all-reduce on a one-rank communicator, side by side
in one process: the raw C loop, the generated low-level call, Communicator.all_reduce
on torch and on CuPy buffers, CuPy's cupy.cuda.nccl, torch.distributed (nccl
backend, one rank) and nccl4py when they import; plus `import ncclbind` time in
a fresh interpreter.

    NCCL_NVLS_ENABLE=0 python3 bench/python/bench_allreduce.py [--iterations 20000] [--json out.json]

Every row issues the same work, out-of-place all-reduces of 2 float32 on one
stream (--stream: a non-blocking stream from torch, or the legacy default
stream), measured two ways: "enqueue", the host time of batches of --batch
calls with the synchronize after each batch left out (the binding's cost: the
batch is short enough not to fill CUDA's launch queue), and "incl. GPU",
`iterations` calls and one synchronize timed together. torch.distributed is in
place: it has no out-of-place all-reduce. The best of --repeats runs is reported. Goals: the low-level call within 1.3x
of raw C; Communicator.all_reduce within 1.0 us of raw C per call; import under
50 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def load_raw_loop():
    """ncclAllReduce from a C loop (bench/python/bench_loop.c, built on first use)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import raw_loop
    return raw_loop.raw_all_reduce_loop()


def import_time_ms(runs: int = 7) -> float:
    """Median wall time of `import ncclbind` in a fresh interpreter (after a warm-up run)."""
    code = "import time; t = time.perf_counter(); import ncclbind; print(time.perf_counter() - t)"
    times = []
    for i in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        if i:
            times.append(float(out.stdout.strip()) * 1e3)
    return statistics.median(times)


BATCH = 200


def measure_once(loop, sync, iterations: int) -> tuple[float, float]:
    """Seconds per call: (enqueue: host time of loop(BATCH) with each sync() left
    out, incl. GPU: loop(iterations) and sync() timed together)."""
    spent = 0.0
    batches = max(1, iterations // BATCH)
    for _ in range(batches):
        t = time.perf_counter()
        loop(BATCH)
        spent += time.perf_counter() - t
        sync()
    t = time.perf_counter()
    loop(iterations)
    sync()
    return spent / (batches * BATCH), (time.perf_counter() - t) / iterations


class Rows(dict):
    """name -> loop; measured together by run(): every repeat takes each row in
    turn, so a drift of the machine over the run reaches every row alike."""

    def run(self, sync, iterations: int, repeats: int, skip) -> dict:
        for name, loop in list(self.items()):
            try:
                loop(min(iterations, 1000))  # warm-up: first-call resolution, caches, lazy init
                sync()
            except Exception as e:  # a row that cannot run is reported, not measured
                skip(name, repr(e))
                del self[name]
        best = {name: (float("inf"), float("inf")) for name in self}
        for _ in range(repeats):
            for name, loop in self.items():
                enqueue, total = measure_once(loop, sync, iterations)
                best[name] = (min(best[name][0], enqueue), min(best[name][1], total))
        return best


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--stream", choices=("nonblocking", "legacy"), default="nonblocking")
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args()
    globals()["BATCH"] = args.batch
    n, repeats = args.iterations, args.repeats
    rows: dict[str, float | str] = {}

    rows["import ncclbind (ms)"] = import_time_ms()

    import ncclbind
    import ncclbind._nccl as low
    from ncclbind import NcclDataType, NcclRedOp

    comm = ncclbind.Communicator.init(1, 0, ncclbind.UniqueId(), device=0)
    h = comm.handle
    results = Rows()

    def skip(name, reason):
        rows[name] = f"skipped: {reason}"

    try:
        import torch
    except ImportError as e:
        torch = None
        skip("Communicator.all_reduce (torch)", e)
    try:
        import cupy
    except ImportError as e:
        cupy = None
        skip("Communicator.all_reduce (CuPy)", e)

    S, torch_stream = 0, None
    if torch is not None:
        x = torch.ones(2, device="cuda:0")
        y = torch.zeros(2, device="cuda:0")
        sync = torch.cuda.synchronize
        sptr, rptr = x.data_ptr(), y.data_ptr()
        if args.stream == "nonblocking":
            torch_stream = torch.cuda.Stream(device=0)  # torch's pool streams are non-blocking
            S = torch_stream.cuda_stream
    else:
        import ncclbind.core.cuda as cuda
        block_s = ncclbind.NcclMemoryResource(0).allocate(8)
        block_r = ncclbind.NcclMemoryResource(0).allocate(8)
        sptr, rptr = block_s.ptr, block_r.ptr

        def sync():
            cuda.stream_synchronize(0)

    # raw C: ncclAllReduce through a plain function pointer in a C loop
    raw_loop = load_raw_loop()

    def raw(count):
        raw_loop(h, sptr, rptr, 2, 7, S, count, False)

    results["raw C ncclAllReduce loop"] = raw

    f32, ssum = NcclDataType.FLOAT32, NcclRedOp.SUM

    def low_level(count):
        f = low.all_reduce
        for _ in range(count):
            f(sptr, rptr, 2, f32, ssum, h, S)

    results["ncclbind._nccl.all_reduce (generated)"] = low_level

    if torch is not None:
        def comm_torch(count):
            ar = comm.all_reduce
            for _ in range(count):
                ar(x, y, stream=S)

        results["Communicator.all_reduce (torch)"] = comm_torch

    if cupy is not None:
        cx = cupy.ones(2, dtype=cupy.float32)
        cy = cupy.zeros(2, dtype=cupy.float32)

        def comm_cupy(count):
            ar = comm.all_reduce
            for _ in range(count):
                ar(cx, cy, stream=S)

        results["Communicator.all_reduce (CuPy)"] = comm_cupy

        try:
            from cupy.cuda import nccl as cupy_nccl
            ccomm = cupy_nccl.NcclCommunicator(1, cupy_nccl.get_unique_id(), 0)
            cxp, cyp = cx.data.ptr, cy.data.ptr

            def cupy_loop(count):
                ar = ccomm.allReduce
                for _ in range(count):
                    ar(cxp, cyp, 2, cupy_nccl.NCCL_FLOAT32, cupy_nccl.NCCL_SUM, S)

            results["cupy.cuda.nccl allReduce"] = cupy_loop
        except Exception as e:  # CuPy built without NCCL, ...
            skip("cupy.cuda.nccl allReduce", repr(e))

    if torch is not None:
        try:
            import torch.distributed as dist
            if not dist.is_initialized():
                torch.cuda.set_device(0)
                dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
            tx = torch.ones(2, device="cuda:0")

            def torch_loop(count):
                ar = dist.all_reduce
                with torch.cuda.stream(torch_stream) if torch_stream is not None else _nothing():
                    for _ in range(count):
                        ar(tx)

            results["torch.distributed.all_reduce (in place)"] = torch_loop
        except Exception as e:
            skip("torch.distributed.all_reduce (in place)", repr(e))

    try:
        import nccl.core as nccl4py  # nccl4py's Pythonic module (0.6.0: Communicator.allreduce)
        from nccl.bindings import nccl as nccl4py_low  # its generated low level
        if torch is None:
            raise RuntimeError("needs torch buffers here")
        ncomm = nccl4py.Communicator.init(1, 0, nccl4py.get_unique_id())
        n4p_sum = nccl4py.SUM

        def nccl4py_low_loop(count):
            f, c = nccl4py_low.all_reduce, ncomm._comm  # its low level takes its Comm object
            for _ in range(count):
                f(sptr, rptr, 2, 7, 0, c, S)

        def nccl4py_loop(count):
            ar = ncomm.allreduce
            for _ in range(count):
                ar(x, y, n4p_sum, stream=S)

        results[f"nccl4py {nccl4py.__version__} low-level all_reduce"] = nccl4py_low_loop
        results[f"nccl4py {nccl4py.__version__} Communicator.allreduce (torch)"] = nccl4py_loop
    except Exception as e:
        skip("nccl4py", repr(e))

    results = results.run(sync, n, repeats, skip)
    raw_us = results["raw C ncclAllReduce loop"][0] * 1e6
    print(f"2-float all-reduce on one rank, {args.stream} stream, batches of {BATCH}, {n} calls, best of "
          f"{repeats} (NCCL {ncclbind.library_info('nccl').version}, Python {sys.version.split()[0]})")
    print(f"{'':44} {'enqueue us':>10} {'x raw C':>8} {'+us vs raw':>10} {'incl. GPU us':>12}")
    for name, (enqueue, total) in results.items():
        us = enqueue * 1e6
        rows[f"{name} (enqueue us/call)"] = us
        rows[f"{name} (incl. GPU us/call)"] = total * 1e6
        print(f"{name:44} {us:10.3f} {us / raw_us:8.2f} {us - raw_us:10.3f} {total * 1e6:12.3f}")
    for name, value in rows.items():
        if isinstance(value, str):
            print(f"{name:44} {value}")
    print(f"{'import ncclbind':44} {rows['import ncclbind (ms)']:9.2f} ms")

    low_ratio = results["ncclbind._nccl.all_reduce (generated)"][0] / results["raw C ncclAllReduce loop"][0]
    goals = {"low-level within 1.3x raw C": low_ratio <= 1.3,
             "import under 50 ms": rows["import ncclbind (ms)"] < 50}
    for lib in ("torch", "CuPy"):
        key = f"Communicator.all_reduce ({lib})"
        if key in results:
            goals[f"{key} under 1.0 us per call"] = results[key][0] * 1e6 < 1.0
            goals[f"{key} within 1.0 us of raw C"] = (results[key][0] * 1e6 - raw_us) < 1.0
    for goal, met in goals.items():
        print(f"goal {'met' if met else 'MISSED'}: {goal}")
    comm.destroy()
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rows": rows, "goals": goals}, out, indent=1)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    sys.exit(main())
