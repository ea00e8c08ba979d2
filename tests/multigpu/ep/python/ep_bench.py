"""Dispatch and combine latency through ncclbind.ep (its methods and its prepared steps), the raw
ncclbind._nccl_ep calls and NCCL EP's functions called from C, in one process per GPU (the same
group, handle and tensors for every layer, interleaved).

    python3 tests/multigpu/ep/python/ep_bench.py [NRANKS] [--iterations N]

Per algorithm (LL expert-major, HT flat) and size (decode: 128 tokens, hidden 7168, top-8 of 256
experts; and others), each call is timed on the host from the call to the end of a stream
synchronize (every rank does the same; the collective waits for the slowest), N times after a
warm-up. The synchronize is cudaStreamSynchronize through ncclbind._nccl.cuda_stream_synchronize
(one C call, GIL released), as the C and Rust programs call it: torch's Stream.synchronize() adds
about 2 us of Python and dispatcher per call (2x H200: Python raw +2.3..3 us over C with it),
which is the harness's cost, not the layer's; rank 0 prints one line per measurement for tests/multigpu/ep/bench_table.py:

    BENCH {"layer": "python", "algo": "ll", "phase": "dispatch", "tokens": 128, "hidden": 7168, "topk": 8,
           "experts": 256, "dtype": "bf16", "us_median": 12.3, "us_p10": 11.9}

layer "python" is ncclbind.ep (Handle.dispatch / combine), "python_prepared" the same calls
prepared once (ncclbind.ep.prepare: each step one C call), "python_raw" the generated raw
function with the records' addresses, "c_in_python" ncclEpDispatch / ncclEpCombine called from C
through plain function pointers with the same records (bench/python/bench_loop.c's raw_ep_pair,
timed in C the same way), all four interleaved per iteration: the C calls are the baseline the
issue's goal is measured against, without the drift between processes that separates the C
program's rounds from Python's. Lines "OVERHEAD ..." give each Python layer's median
minus the C calls' per measurement. GPU only; needs NCCL 2.32.3 and NCCL EP 0.2.0.
"""
import json
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "bench", "python"))
import raw_loop  # noqa: E402  (bench/python/raw_loop.py: the C calls, built on first use)

# (algo, tokens, hidden, top_k, experts)
SIZES = [("ll", 128, 7168, 8, 256), ("ll", 32, 7168, 8, 256), ("ll", 128, 2048, 4, 64),
         ("ht", 128, 7168, 8, 256), ("ht", 4096, 7168, 8, 256)]
# NCCLBIND_EP_ALGOS: "ll" or "ht" measures that algorithm's sizes only (as ep_ranks.c and .rs).
SIZES = [s for s in SIZES if os.environ.get("NCCLBIND_EP_ALGOS", "") in ("", s[0])]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def bench_size(torch, comm, rank, nranks, algo, tokens, hidden, top_k, experts, iterations):
    import numpy as np

    from ncclbind import _nccl, _nccl_ep, ep
    c_pair = raw_loop.raw_ep_pair()
    # A stream of its own, as ep_ranks.c and ep_ranks.rs create one (cudaStreamCreate), not torch's
    # current stream, which is the legacy default stream (handle 0) unless the caller switched: on
    # 2x H200 (run 19) Python's raw calls on it measured 6-12% over C at LL sizes, the layer itself
    # 0-3% over the raw calls. The tensors below are made on torch's stream: torch.cuda.synchronize()
    # orders them before NCCL EP's work on this one.
    stream = torch.cuda.Stream()
    stream_int = stream.cuda_stream
    local = experts // nranks
    if experts % nranks:
        return []
    rng = np.random.default_rng(rank)
    routing = torch.from_numpy(np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)])).cuda()
    x = torch.randn((tokens, hidden), device="cuda").to(torch.bfloat16)
    w = torch.rand((tokens, top_k), device="cuda", dtype=torch.float32)
    # HT's receive budget as the C and Rust benches take it (NCCLBIND_EP_HT_RECV; ep_ranks.c's setup()):
    # eager (0, NCCL_EP_AUTO: the library's own bound; outputs of nranks * tokens rows, never fewer
    # than the routing's recv_total_counter), rank (explicit nranks * tokens) or topk (x top_k).
    mode = os.environ.get("NCCLBIND_EP_HT_RECV") or "eager"
    slots = nranks * tokens * (top_k if mode == "topk" else 1)
    extra = {"max_recv_tokens_per_rank": slots} if algo == "ht" and mode != "eager" else {}
    torch.cuda.synchronize()
    group = ep.Group.create(comm, ep.GroupConfig(
        algorithm="low_latency" if algo == "ll" else "high_throughput", num_experts=experts,
        max_dispatch_tokens_per_rank=tokens, max_token_bytes=hidden * x.element_size(), **extra))
    try:
        if algo == "ll":
            handle = group.create_handle("expert_major", routing, stream=stream)
            recv = torch.zeros((local, nranks * tokens, hidden), dtype=torch.bfloat16, device="cuda")
            counts = torch.zeros((local,), dtype=torch.int32, device="cuda")
            d_in, d_out = ep.DispatchInputs(x), ep.DispatchOutputs(recv)
            d_info = ep.LayoutInfo(expert_counters=counts)
            c_in = ep.CombineInputs(recv)
            out = torch.zeros((tokens, hidden), dtype=torch.bfloat16, device="cuda")
            c_out = ep.CombineOutputs(out, topk_weights=w)
        else:
            handle = group.create_handle("flat", routing, stream=stream)
            recv = torch.zeros((slots, hidden), dtype=torch.bfloat16, device="cuda")
            d_in = ep.DispatchInputs(x, topk_weights=w)
            d_out = ep.DispatchOutputs(recv, topk_weights=torch.zeros((slots, top_k), device="cuda"),
                                       topk_idx=torch.zeros((slots, top_k), dtype=torch.int64, device="cuda"))
            d_info = None
            c_in = ep.CombineInputs(recv)
            out = torch.zeros((tokens, hidden), dtype=torch.bfloat16, device="cuda")
            c_out = ep.CombineOutputs(out)
        torch.cuda.synchronize()  # the outputs' zeroing, on torch's stream, before the first dispatch
        raw_handle = handle.handle
        d_in_a, d_out_a, d_info_a = d_in.address, d_out.address, d_info.address if d_info else 0
        c_in_a, c_out_a = c_in.address, c_out.address
        c_pair_args = (raw_handle, d_in_a, d_out_a, d_info_a, c_in_a, c_out_a, stream_int, True)
        d_step = ep.prepare(handle.dispatch, d_in, d_out, layout_info=d_info, stream=stream)
        c_step = ep.prepare(handle.combine, c_in, c_out, stream=stream)
        raw_d, raw_c = _nccl_ep.dispatch, _nccl_ep.combine
        layers = ("python", "python_prepared", "python_raw", "c_in_python")
        times = {(layer, phase): [] for layer in layers for phase in ("dispatch", "combine")}
        sync, clock = _nccl.cuda_stream_synchronize, time.perf_counter
        # Each iteration runs every layer once, in an order that rotates from one iteration to the
        # next: with a fixed order (python, python_raw, C) the C calls, always last, measured up to
        # 1.4 us under Python's raw calls even at HT 4096x7168 (356 us a call; 2x H200, NCCL EP
        # 0.2.0), more than a call's host cost; rotating gives every layer every position. Each
        # layer's calls are written out where they are timed, as a caller's loop makes them: on one
        # H200 a closure around them cost Python's rows about 0.5 us a call, which is the harness's.
        for i in range(iterations + 20):
            for k in range(len(layers)):
                layer = layers[(i + k) % len(layers)]
                if layer == "python":
                    t0 = clock()
                    handle.dispatch(d_in, d_out, layout_info=d_info, stream=stream)
                    sync(stream_int)
                    t1 = clock()
                    handle.combine(c_in, c_out, stream=stream)
                    sync(stream_int)
                    t2 = clock()
                elif layer == "python_prepared":
                    t0 = clock()
                    d_step()
                    sync(stream_int)
                    t1 = clock()
                    c_step()
                    sync(stream_int)
                    t2 = clock()
                elif layer == "python_raw":
                    t0 = clock()
                    raw_d(raw_handle, d_in_a, d_out_a, d_info_a, 0, stream_int)
                    sync(stream_int)
                    t1 = clock()
                    raw_c(raw_handle, c_in_a, c_out_a, 0, stream_int)
                    sync(stream_int)
                    t2 = clock()
                else:
                    t0 = 0.0
                    t1, t2 = c_pair(*c_pair_args)
                    t2 += t1
                if i >= 20:
                    times[(layer, "dispatch")].append((t1 - t0) * 1e6)
                    times[(layer, "combine")].append((t2 - t1) * 1e6)
        handle.destroy()
    finally:
        group.destroy()
    rows = []
    for (layer, phase), values in times.items():
        rows.append({"layer": layer, "algo": algo, "phase": phase, "tokens": tokens, "hidden": hidden,
                     "topk": top_k, "experts": experts, "dtype": "bf16",
                     "us_median": round(statistics.median(values), 2), "us_p10": round(percentile(values, 0.1), 2)})
    return rows


def rank_main(rank, nranks, port, iterations):
    launch.load_named_libraries_first()
    import torch
    import torch.distributed as dist

    import ncclbind
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    uid = ncclbind.UniqueId.share_store(store, rank)
    comm = ncclbind.Communicator.init(nranks, rank, uid, device=rank)
    failed = 0
    try:
        for algo, tokens, hidden, top_k, experts in SIZES:
            try:
                rows = bench_size(torch, comm, rank, nranks, algo, tokens, hidden, top_k, experts, iterations)
            except Exception as error:  # noqa: BLE001 - a size NCCL EP refuses is reported, the rest run
                failed += 1
                print(f"rank {rank}: FAIL {algo} tokens={tokens} hidden={hidden} top_k={top_k} experts={experts}: "
                      f"{type(error).__name__}: {error}", flush=True)
                traceback.print_exc()
                continue
            if rank == 0:
                for row in rows:
                    print("BENCH " + json.dumps(row), flush=True)
                by = {(r["layer"], r["phase"]): r["us_median"] for r in rows}
                for phase in ("dispatch", "combine"):
                    c = by[("c_in_python", phase)]
                    for layer, title in (("python", "ncclbind.ep"), ("python_prepared", "ep.prepare's step"),
                                         ("python_raw", "the raw call")):
                        extra = by[(layer, phase)] - c
                        print(f"OVERHEAD {algo} {phase} tokens={tokens} hidden={hidden}: {title} {extra:+.2f} us over "
                              f"the C calls ({100 * extra / c:+.2f}% of {c:.2f} us)", flush=True)
    finally:
        comm.destroy()
    sys.exit(1 if failed else 0)


def main():
    argv = sys.argv[1:]
    iterations = 200
    if "--iterations" in argv:
        at = argv.index("--iterations")
        iterations = int(argv[at + 1])
        del argv[at:at + 2]
    nranks = launch.ranks_to_run(argv, launch.torch_gpu_count())
    if nranks is None:
        return 0
    return launch.run_ranks(rank_main, nranks, (launch.free_port(), iterations), timeout=240, name="ep_bench")


if __name__ == "__main__":
    sys.exit(main())
