"""The host cost of one NCCL EP dispatch and combine from Python, over the stand-in libnccl_ep
(tests/python/fake_nccl_ep.c) and libnccl (fake_nccl.c) that NCCLBIND_NCCL_EP_PATH and
NCCLBIND_NCCL_PATH name (bench/ep_host/run.sh builds them and the extension):

    python3 ep_host.py python N       ncclbind.ep: Handle.dispatch / combine, the same records each call
    python3 ep_host.py python_prepared N   ncclbind.ep.prepare's steps of those calls (made once)
    python3 ep_host.py python_raw N   the generated ncclbind._nccl_ep.dispatch / combine with the
                                      records' addresses (the raw arguments)
    python3 ep_host.py python_checked N   Handle.dispatch / combine alternating between two equal
                                      record sets, so that every call runs the generated checks of
                                      policy/nccl_ep.toml's rules (no per-step reuse)

Each as tests/multigpu/ep/python/ep_bench.py calls them for LL expert-major at its decode size,
rank 0 of 2, with host memory (anonymous mmap) as (pointer, shape, dtype, device) specs where the
GPU bench has torch tensors, and a stream object with .cuda_stream where it has torch's. A warm-up
of N / 10 pairs, then N dispatches timed as one and N combines timed as one
(time.perf_counter_ns; the `for` loop's own cost is in the figure, as in a caller's loop); one
line for rounds.py:
    EP_HOST {"layer": "python", "n": N, "dispatch_ns": 1234.5, "combine_ns": 987.6}

NumPy is not imported (checked): it loads libquadmath, whose printf extensions put every printf of
the process on glibc's slow path, and the stand-in formats text on each call: 150-200 ns more a
call, measured here, that the C and Rust processes do not pay.
"""
from __future__ import annotations

import ctypes
import json
import mmap
import os
import random
import sys
import time
from array import array

# ep_bench.py's decode size; 2 ranks as on 2x H200: the stand-in moves data for a one-rank group
# (14 MiB per dispatch here), for two it only checks the arguments.
TOKENS, HIDDEN, TOPK, EXPERTS, NRANKS = 128, 7168, 8, 256, 2
LOCAL = EXPERTS // NRANKS


class Stream:
    """What the GPU bench passes: an object whose .cuda_stream is the handle (torch.cuda.Stream)."""
    cuda_stream = 0


def spec(shape: tuple[int, ...], dtype: str, itemsize: int, keep: list) -> tuple:
    """Host memory (never touched by the stand-in at two ranks) as an explicit buffer spec."""
    count = 1
    for extent in shape:
        count *= extent
    memory = mmap.mmap(-1, count * itemsize)
    keep.append(memory)
    return (ctypes.addressof(ctypes.c_char.from_buffer(memory)), shape, dtype, 0)


def main() -> int:
    layer, n = sys.argv[1], int(sys.argv[2])
    if layer not in ("python", "python_prepared", "python_raw", "python_checked") or n < 1:
        sys.exit("usage: ep_host.py python|python_prepared|python_raw|python_checked N")
    stand_in = ctypes.CDLL(os.environ["NCCLBIND_NCCL_EP_PATH"])  # the copy the runtime loads
    stand_in.fakeEpSetNranks(NRANKS)
    stand_in.fakeEpSetLogging(0)

    import ncclbind
    from ncclbind import _nccl_ep, ep
    comm = ncclbind.Communicator.init(NRANKS, 0, ncclbind.get_unique_id())
    group = ep.Group.create(comm, ep.GroupConfig(algorithm="low_latency", num_experts=EXPERTS,
                                                 max_dispatch_tokens_per_rank=TOKENS, max_token_bytes=HIDDEN * 2))
    keep: list = []
    rng = random.Random(0)
    routing = array("q", [e for _ in range(TOKENS) for e in rng.sample(range(EXPERTS), TOPK)])
    stream = Stream()
    handle = group.create_handle("expert_major", (routing.buffer_info()[0], (TOKENS, TOPK), "int64", 0),
                                 stream=stream)
    x = spec((TOKENS, HIDDEN), "bfloat16", 2, keep)
    recv = spec((LOCAL, NRANKS * TOKENS, HIDDEN), "bfloat16", 2, keep)
    counts = spec((LOCAL,), "int32", 4, keep)
    w = spec((TOKENS, TOPK), "float32", 4, keep)
    out = spec((TOKENS, HIDDEN), "bfloat16", 2, keep)
    # ep_bench.py's records, made once and passed again each call (the per-step path)
    d_in, d_out = ep.DispatchInputs(x), ep.DispatchOutputs(recv)
    d_info = ep.LayoutInfo(expert_counters=counts)
    c_in, c_out = ep.CombineInputs(recv), ep.CombineOutputs(out, topk_weights=w)
    raw_handle, stream_int = handle.handle, stream.cuda_stream
    d_args = (d_in.address, d_out.address, d_info.address, 0)
    c_args = (c_in.address, c_out.address, 0)
    clock = time.perf_counter_ns

    if layer == "python":
        def dispatch_loop(count: int) -> None:
            for _ in range(count):
                handle.dispatch(d_in, d_out, layout_info=d_info, stream=stream)

        def combine_loop(count: int) -> None:
            for _ in range(count):
                handle.combine(c_in, c_out, stream=stream)
    elif layer == "python_prepared":
        dispatch_step = ep.prepare(handle.dispatch, d_in, d_out, layout_info=d_info, stream=stream)
        combine_step = ep.prepare(handle.combine, c_in, c_out, stream=stream)

        def dispatch_loop(count: int) -> None:
            for _ in range(count):
                dispatch_step()

        def combine_loop(count: int) -> None:
            for _ in range(count):
                combine_step()
    elif layer == "python_checked":
        d_sets = ((d_in, d_out, d_info), (ep.DispatchInputs(x), ep.DispatchOutputs(recv),
                                          ep.LayoutInfo(expert_counters=counts)))
        c_sets = ((c_in, c_out), (ep.CombineInputs(recv), ep.CombineOutputs(out, topk_weights=w)))

        def dispatch_loop(count: int) -> None:
            for i in range(count):
                inputs, outputs, info = d_sets[i & 1]
                handle.dispatch(inputs, outputs, layout_info=info, stream=stream)

        def combine_loop(count: int) -> None:
            for i in range(count):
                inputs, outputs = c_sets[i & 1]
                handle.combine(inputs, outputs, stream=stream)
    else:
        def dispatch_loop(count: int) -> None:
            for _ in range(count):
                _nccl_ep.dispatch(raw_handle, *d_args, stream_int)

        def combine_loop(count: int) -> None:
            for _ in range(count):
                _nccl_ep.combine(raw_handle, *c_args, stream_int)

    for _ in range(n // 10 + 1):
        dispatch_loop(1)
        combine_loop(1)
    t0 = clock()
    dispatch_loop(n)
    t1 = clock()
    combine_loop(n)
    t2 = clock()
    if "numpy" in sys.modules:
        sys.exit("ep_host.py: NumPy was imported, which slows the stand-in's printf (see the docstring)")
    print("EP_HOST " + json.dumps({"layer": layer, "n": n, "dispatch_ns": round((t1 - t0) / n, 1),
                                   "combine_ns": round((t2 - t1) / n, 1)}), flush=True)
    handle.destroy()
    group.destroy()
    comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
