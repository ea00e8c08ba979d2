"""NCCL EP through ncclbind.ep on GPUs: one process per GPU, the NCCL communicator made with
ncclbind (unique id shared through a torch TCPStore), then EP groups and handles.

    python3 tests/multigpu/ep/python/ep_ranks.py [NRANKS]      (default: every GPU)

Cases (each a PASS or FAIL line per rank, then a summary; exit status 1 on any failure):
  * LL (expert-major, rank-major) and HT (flat, expert-major) dispatch then combine, for several
    token counts, top-k, hidden sizes and expert counts, bf16 and fp32 tokens (int64 and int32
    routing): every received token checked against its source row and its expert (counters,
    received expert ids and weights), and every combined token against the weighted sum
    (tests/multigpu/ep/python/ep_reference.py, NumPy, also run on the CPU stand-in);
  * fp8 (e4m3) tokens with forwarded scales (DispatchQuantizationRecipe.FWD), dispatch only;
  * staged LL (send_only, then complete) for dispatch and combine;
  * Handle.update with new routing (another token count), then dispatch/combine again;
  * the same through ep.prepare's steps (each made twice; staged LL with a prepared complete);
  * a Python allocator (AllocConfig over ncclbind.mem_alloc) that counts its calls;
  * the active-rank mask (enable_mask: mask_query / mask_update / mask_clean, async error);
  * the checks refusing bad routing before NCCL EP is called (no collective is entered).
A case NCCL EP itself refuses for a type other than bf16 (ncclInvalidArgument / Usage) is a SKIP
line with the library's message, not a failure. Needs NCCL 2.32.3 and NCCL EP 0.2.0
(NCCLBIND_NCCL_PATH, NCCLBIND_NCCL_EP_PATH, LD_LIBRARY_PATH), torch with CUDA. GPU only.
"""
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import launch  # noqa: E402  (tests/multigpu/launch.py: NVLS off, the ranks' launch)

MAX_TOKENS = 128  # max_dispatch_tokens_per_rank of every group here
# (float32 cases, bfloat16 cases): LL combine takes a hidden that is a multiple of 512 (the policy's
# limit: libnccl_ep 0.2.0's ll_ep.cuh static_asserts; 128 failed to compile there, reported as
# ncclInternalError), so fp32 runs at the smallest hidden it accepts
HIDDENS = (512, 2048)
# NCCLBIND_EP_ALGOS: "ll" or "ht" runs that algorithm's cases only (run.sh runs each in its own
# processes: every HT fault so far came after LL groups on the same communicator)
ALGOS = tuple(a for a in ("ll", "ht") if os.environ.get("NCCLBIND_EP_ALGOS", "") in ("", a))


class Report:
    def __init__(self, rank):
        self.rank, self.passed, self.failed, self.skipped = rank, 0, 0, 0

    def result(self, name, errors):
        if errors:
            self.failed += 1
            print(f"rank {self.rank}: FAIL {name}: " + "; ".join(errors[:4]), flush=True)
        else:
            self.passed += 1
            print(f"rank {self.rank}: PASS {name}", flush=True)

    def skip(self, name, why):
        self.skipped += 1
        print(f"rank {self.rank}: SKIP {name}: {why}", flush=True)


class Env:
    """What every case needs: torch, the communicator, this rank, the stream."""

    def __init__(self, torch, comm, rank, nranks):
        self.torch, self.comm, self.rank, self.nranks = torch, comm, rank, nranks
        self.stream = torch.cuda.current_stream()

    def dev(self, array, dtype=None):
        t = self.torch.from_numpy(array).cuda()
        return t if dtype is None else t.to(dtype)

    def zeros(self, shape, dtype):
        return self.torch.zeros(shape, dtype=dtype, device="cuda")

    def host(self, t):
        return t.float().cpu().numpy() if t.dtype.is_floating_point else t.cpu().numpy()


def make_group(env, algo, experts, token_bytes, **extra):
    from ncclbind import ep
    if algo == "ht":
        local = experts // env.nranks
        extra.setdefault("max_recv_tokens_per_rank", env.nranks * MAX_TOKENS * local)
    return ep.Group.create(env.comm, ep.GroupConfig(
        algorithm="low_latency" if algo == "ll" else "high_throughput", num_experts=experts,
        max_dispatch_tokens_per_rank=MAX_TOKENS, max_token_bytes=token_bytes, **extra))


def all_inputs(env, tokens, top_k, experts, seed):
    import ep_reference as ref
    routing = [ref.routing(r, tokens, top_k, experts, seed) for r in range(env.nranks)]
    rows = [ref.tokens(r, tokens, env.hidden) for r in range(env.nranks)]
    weights = [ref.weights(r, tokens, top_k) for r in range(env.nranks)]
    return routing, rows, weights


def round_trip(env, group, layout, tokens, top_k, experts, dtype, index_dtype, seed, staged=False, update_to=None,
               prepared=False):
    """create_handle, dispatch, check, expert step, combine, check; with update_to, then update the
    routing to that many tokens and do it again on the same handle; prepared: each dispatch,
    combine (and complete) through ep.prepare's steps, each step made twice. Returns the errors."""
    import numpy as np

    import ep_reference as ref
    from ncclbind import ep
    torch = env.torch
    algo = "ll" if group.config.algorithm == 0 else "ht"
    mode = f"{algo}_{layout}"
    local = experts // env.nranks
    errors = []
    handle = None
    try:
        for step, count in enumerate([tokens] + ([update_to] if update_to is not None else [])):
            routing, rows, weights = all_inputs(env, count, top_k, experts, seed + step)
            topk = env.dev(routing[env.rank]).to(index_dtype)
            info = None
            if algo == "ht":
                total = env.zeros((1,), torch.int32)
                counters = env.zeros((local,), torch.int32)
                offsets = env.zeros((local,), torch.int32) if layout == "expert_major" else None
                info = ep.LayoutInfo(expert_counters=counters, expert_offsets=offsets, recv_total_counter=total,
                                     recv_topk_idx_kind="local")
            if handle is None:
                handle = group.create_handle(layout, topk, layout_info=info, stream=env.stream)
            else:
                handle.update(topk, layout_info=info, stream=env.stream)
            x = env.dev(rows[env.rank], dtype)
            w = env.dev(weights[env.rank])
            slots = group.config.max_recv_tokens_per_rank
            if mode == "ll_expert_major":
                recv = env.zeros((local, env.nranks * MAX_TOKENS, env.hidden), dtype)
                counts = env.zeros((local,), torch.int32)
                d_in, d_out = ep.DispatchInputs(x), ep.DispatchOutputs(recv)
                d_info = ep.LayoutInfo(expert_counters=counts)
            elif mode == "ll_rank_major":
                recv = env.zeros((env.nranks, MAX_TOKENS, env.hidden), dtype)
                recv_w = env.zeros((env.nranks, MAX_TOKENS, top_k), torch.float32)
                # libnccl_ep 0.2.0 asserts int32 received ids for LL rank-major, int64 for HT flat,
                # whatever the routing's own index type (its strings: "recv_topk_idx->datatype == ...")
                recv_idx = torch.full((env.nranks, MAX_TOKENS, top_k), -1, dtype=torch.int32, device="cuda")
                counts = env.zeros((env.nranks,), torch.int32)
                d_in = ep.DispatchInputs(x, topk_weights=w)
                d_out = ep.DispatchOutputs(recv, topk_weights=recv_w, topk_idx=recv_idx)
                d_info = ep.LayoutInfo(src_rank_counters=counts, recv_topk_idx_kind="local")
            elif mode == "ht_flat":
                recv = env.zeros((slots, env.hidden), dtype)
                recv_w = env.zeros((slots, top_k), torch.float32)
                recv_idx = torch.full((slots, top_k), -1, dtype=torch.int64, device="cuda")
                d_in = ep.DispatchInputs(x, topk_weights=w)
                d_out = ep.DispatchOutputs(recv, topk_weights=recv_w, topk_idx=recv_idx)
                d_info = None
            else:  # ht_expert_major
                recv = env.zeros((slots, env.hidden), dtype)
                recv_w = env.zeros((slots,), torch.float32)
                d_in = ep.DispatchInputs(x, topk_weights=w)
                d_out = ep.DispatchOutputs(recv, topk_weights=recv_w)
                d_info = None
            config = ep.DispatchConfig(send_only=1) if staged else None
            step_call(handle.dispatch, prepared, staged, env, d_in, d_out, layout_info=d_info, config=config)
            torch.cuda.synchronize()
            got = env.host(recv)
            if mode == "ll_expert_major":
                errors += ref.check_ll_expert_major(got, env.host(counts), routing, rows, env.rank, experts,
                                                    env.nranks)
                step_in = ref.expert_step(mode, got)
            elif mode == "ll_rank_major":
                errors += ref.check_ll_rank_major(got, env.host(recv_idx), env.host(recv_w), env.host(counts), routing,
                                                  rows, weights, env.rank, experts, env.nranks)
                step_in = ref.expert_step(mode, got, env.host(recv_idx), env.host(recv_w))
            elif mode == "ht_flat":
                n = int(env.host(total)[0])
                errors += ref.check_ht_flat(got, env.host(recv_idx), env.host(recv_w), n, routing, rows, weights,
                                            env.rank, experts, env.nranks)
                step_in = ref.expert_step(mode, got, env.host(recv_idx), env.host(recv_w))
            else:
                n = int(env.host(total)[0])
                errors += ref.check_ht_expert_major(got[:n], routing, rows, env.rank, experts, env.nranks)
                step_in = ref.expert_step(mode, got, recv_weights=env.host(recv_w))
            out = env.zeros((count, env.hidden), dtype)
            c_out = ep.CombineOutputs(out, topk_weights=w) if mode == "ll_expert_major" else ep.CombineOutputs(out)
            c_config = ep.CombineConfig(send_only=1) if staged else None
            step_call(handle.combine, prepared, staged, env, ep.CombineInputs(env.dev(np.ascontiguousarray(step_in), dtype)),
                      c_out, config=c_config)
            torch.cuda.synchronize()
            expected = ref.expected_combine(routing[env.rank], rows[env.rank], weights[env.rank])
            errors += ref.check_combine(env.host(out), expected, str(dtype).replace("torch.", ""))
    finally:
        if handle is not None:
            handle.destroy()
    return errors


def step_call(method, prepared, staged, env, *args, **kwargs):
    """method(*args, **kwargs, stream=env.stream), then complete() when staged; prepared: the same
    through ep.prepare's steps, made twice (the second repeats the first's call)."""
    from ncclbind import ep
    handle = method.__self__
    if not prepared:
        method(*args, **kwargs, stream=env.stream)
        if staged:
            handle.complete(stream=env.stream)
        return
    steps = [ep.prepare(method, *args, **kwargs, stream=env.stream)]
    if staged:
        steps.append(ep.prepare(handle.complete, stream=env.stream))
    for _ in range(2):
        for step in steps:
            step()


def library_refused(error):
    from ncclbind.errors import NcclError, NcclInvalid
    return isinstance(error, NcclError) and not isinstance(error, NcclInvalid) and \
        getattr(error, "name", "") in ("ncclInvalidArgument", "ncclInvalidUsage")


def run_case(report, name, fn, optional_type=False):
    try:
        report.result(name, fn())
    except Exception as error:  # noqa: BLE001 - every case reports, the next one runs
        if optional_type and library_refused(error):
            report.skip(name, f"NCCL EP refused it: {error}")
        else:
            report.result(name, [f"{type(error).__name__}: {error}"] + traceback.format_exc().splitlines()[-3:])


def run_checks(env, report):
    from ncclbind import ep
    torch = env.torch
    report.result("ep.get_version is 0.2.0 or later", [] if ep.get_version() >= 200 else [str(ep.get_version())])
    expert_counts = (4 * env.nranks, 8 * env.nranks)
    layouts = {"ll": ("expert_major", "rank_major"), "ht": ("flat", "expert_major")}
    for algo in ALGOS:
        for experts in expert_counts:
            group = make_group(env, algo, experts, max(HIDDENS) * 4)
            try:
                # HT: even token counts. libnccl_ep 0.2.0's HT dispatch asserts (host, aborting the
                # process) "num_tokens_per_rank * s2d_inner_dim must be a multiple of 4 (flat layout
                # with lsa_team_size <= 3 requires even num_tokens_per_rank)": 2 GPUs are one LSA team of 2.
                odd = 0 if algo == "ll" else 1
                for tokens, top_k in ((1 + odd, 1), (37 + odd, min(4, experts)), (MAX_TOKENS, min(8, experts))):
                    for layout in layouts[algo]:
                        for hidden, dtype in ((HIDDENS[0], torch.float32), (HIDDENS[1], torch.bfloat16)):
                            env.hidden = hidden
                            index = torch.int32 if tokens in (37, 38) else torch.int64
                            name = (f"{algo} {layout} experts={experts} tokens={tokens} top_k={top_k} hidden={hidden} "
                                    f"{str(dtype)[6:]} idx={str(index)[6:]}")
                            run_case(report, name, lambda: round_trip(env, group, layout, tokens, top_k, experts,
                                                                      dtype, index, seed=tokens + hidden),
                                     optional_type=dtype != torch.bfloat16)
                env.hidden = HIDDENS[1]
                for layout in layouts[algo]:
                    run_case(report, f"{algo} {layout} experts={experts}: update to new routing (96 -> 50 tokens)",
                             lambda: round_trip(env, group, layout, 96, min(4, experts), experts, torch.bfloat16,
                                                torch.int64, seed=7, update_to=50))
                for layout in layouts[algo]:
                    run_case(report, f"{algo} {layout} experts={experts}: ep.prepare's steps, made twice, then update "
                             "(96 -> 50 tokens)",
                             lambda: round_trip(env, group, layout, 96, min(4, experts), experts, torch.bfloat16,
                                                torch.int64, seed=13, update_to=50, prepared=True))
                if algo == "ll":
                    run_case(report, f"ll expert_major experts={experts}: ep.prepare's staged steps (send_only, "
                             "complete), made twice",
                             lambda: round_trip(env, group, "expert_major", 64, min(4, experts), experts,
                                                torch.bfloat16, torch.int64, seed=17, staged=True, prepared=True))
                    for layout in layouts[algo]:
                        run_case(report, f"ll {layout} experts={experts}: staged (send_only, then complete)",
                                 lambda: round_trip(env, group, layout, 64, min(4, experts), experts, torch.bfloat16,
                                                    torch.int64, seed=11, staged=True))
                run_case(report, f"{algo} experts={experts}: checks refuse bad routing before NCCL EP",
                         lambda: refusals(env, group, algo, experts))
                run_case(report, f"{algo} experts={experts}: checks refuse received ids of the wrong type for the mode",
                         lambda: received_ids_refusal(env, group, algo, experts))
                if algo == "ll":
                    run_case(report, f"ll experts={experts}: combine refuses a hidden its kernel cannot compile",
                             lambda: ll_combine_hidden_refusal(env, group, experts))
            finally:
                group.destroy()
    for algo in ALGOS:
        run_case(report, f"{algo} fp8 e4m3 tokens, forwarded scales (dispatch)", lambda: fp8_dispatch(env, algo),
                 optional_type=True)
    if "ll" in ALGOS:
        run_case(report, "custom allocator (Python callables over ncclMemAlloc) counts its calls",
                 lambda: custom_allocator(env))
        run_case(report, "active-rank mask: query, update, clean, async error", lambda: mask(env),
                 optional_type=True)


def refusals(env, group, algo, experts):
    """Bad routing is refused by ncclbind.ep, naming the argument, before any collective."""
    from ncclbind.errors import NcclInvalid
    torch = env.torch
    errors = []
    layout = "expert_major"
    cases = [("float routing", torch.zeros((4, 2), dtype=torch.float32, device="cuda"), "dtype float32"),
             ("1-D routing", torch.zeros((4,), dtype=torch.int64, device="cuda"), "1-D"),
             ("top-k above the experts", torch.zeros((4, experts + 1), dtype=torch.int64, device="cuda"), "above"),
             ("too many tokens", torch.zeros((MAX_TOKENS + 1, 2), dtype=torch.int64, device="cuda"), "above")]
    if env.torch.cuda.device_count() > 1:
        other = (env.rank + 1) % env.torch.cuda.device_count()
        cases.append(("routing on another GPU", torch.zeros((4, 2), dtype=torch.int64, device=f"cuda:{other}"),
                      "on CUDA device"))
    for what, tensor, words in cases:
        try:
            group.create_handle(layout, tensor, stream=env.stream).destroy()
            errors.append(f"{what}: accepted")
        except NcclInvalid as e:
            if e.argument != "topk_idx" or words not in str(e):
                errors.append(f"{what}: {e} (argument {e.argument})")
    return errors


def ll_combine_hidden_refusal(env, group, experts):
    """LL combine at a hidden that is not a multiple of the policy's limit (512) is refused by
    ncclbind.ep naming inputs.tokens, before NCCL EP is called (the real library would fail to
    JIT-compile its combine kernel and report ncclInternalError). No dispatch runs: the refusal
    comes before any collective, on every rank alike."""
    from ncclbind import ep
    from ncclbind.errors import NcclInvalid
    torch = env.torch
    hidden, tokens, top_k, local = 256, 4, 2, experts // env.nranks
    routing, _, weights = all_inputs(env, tokens, top_k, experts, seed=17)
    handle = group.create_handle("expert_major", env.dev(routing[env.rank]), stream=env.stream)
    errors = []
    try:
        handle.combine(ep.CombineInputs(env.zeros((local, env.nranks * MAX_TOKENS, hidden), torch.bfloat16)),
                       ep.CombineOutputs(env.zeros((tokens, hidden), torch.bfloat16),
                                         topk_weights=env.dev(weights[env.rank])), stream=env.stream)
        errors.append(f"hidden {hidden}: combine accepted")
    except NcclInvalid as e:
        if e.argument != "inputs.tokens" or "multiple of 512" not in str(e):
            errors.append(f"{e} (argument {e.argument})")
    finally:
        torch.cuda.synchronize()
        handle.destroy()
    return errors


def received_ids_refusal(env, group, algo, experts):
    """Received expert ids of the other index type than the mode's (libnccl_ep 0.2.0 asserts
    int32 in LL rank-major, int64 in HT flat: a wrong one aborts the process) are refused by
    ncclbind.ep naming outputs.topk_idx and the mode, before NCCL EP is called."""
    from ncclbind import ep
    from ncclbind.errors import NcclInvalid
    torch = env.torch
    tokens, top_k = 4, 2
    routing, rows, _ = all_inputs(env, tokens, top_k, experts, seed=13)
    topk = env.dev(routing[env.rank])
    x = env.dev(rows[env.rank], torch.float32)
    if algo == "ll":
        layout, mode, wrong, info = "rank_major", "ll_rank_major", torch.int64, None
        recv = env.zeros((env.nranks, MAX_TOKENS, env.hidden), torch.float32)
        ids = env.zeros((env.nranks, MAX_TOKENS, top_k), wrong)
    else:
        layout, mode, wrong = "flat", "ht_flat", torch.int32
        info = ep.LayoutInfo(expert_counters=env.zeros((experts // env.nranks,), torch.int32),
                             recv_total_counter=env.zeros((1,), torch.int32))
        slots = group.config.max_recv_tokens_per_rank
        recv = env.zeros((slots, env.hidden), torch.float32)
        ids = env.zeros((slots, top_k), wrong)
    errors = []
    handle = group.create_handle(layout, topk, layout_info=info, stream=env.stream)
    try:
        handle.dispatch(ep.DispatchInputs(x), ep.DispatchOutputs(recv, topk_idx=ids), stream=env.stream)
        errors.append(f"{mode}: {str(wrong)[6:]} received ids accepted")
    except NcclInvalid as e:
        if e.argument != "outputs.topk_idx" or f"in {mode}" not in str(e):
            errors.append(f"{mode}: {e} (argument {e.argument})")
    finally:
        torch.cuda.synchronize()
        handle.destroy()
    return errors


def fp8_dispatch(env, algo):
    import numpy as np

    import ep_reference as ref
    from ncclbind import ep
    torch = env.torch
    experts, tokens, top_k, hidden, scale_elems = 4 * env.nranks, 32, 2, 512, 4
    group = make_group(env, algo, experts, hidden + scale_elems * 4 + 16)
    local = experts // env.nranks
    errors = []
    try:
        routing, rows, weights = all_inputs_fp8(env, tokens, top_k, experts, hidden)
        topk = env.dev(routing[env.rank])
        layout = "expert_major"
        info = None
        if algo == "ht":
            total = env.zeros((1,), torch.int32)
            info = ep.LayoutInfo(expert_counters=env.zeros((local,), torch.int32), recv_total_counter=total,
                                 expert_offsets=env.zeros((local,), torch.int32))
        handle = group.create_handle(layout, topk, layout_info=info, stream=env.stream)
        try:
            x = env.dev(rows[env.rank], torch.float8_e4m3fn)
            scales = env.dev(np.full((tokens, scale_elems), env.rank + 1, np.float32))
            slots = group.config.max_recv_tokens_per_rank
            if algo == "ll":
                recv = env.zeros((local, env.nranks * MAX_TOKENS, hidden), torch.float8_e4m3fn)
                recv_scales = env.zeros((local, env.nranks * MAX_TOKENS, scale_elems), torch.float32)
                counts = env.zeros((local,), torch.int32)
                handle.dispatch(ep.DispatchInputs(x, scales=scales), ep.DispatchOutputs(recv, scales=recv_scales),
                                layout_info=ep.LayoutInfo(expert_counters=counts),
                                config=ep.DispatchConfig(quant_recipe="fwd"), stream=env.stream)
                torch.cuda.synchronize()
                errors += ref.check_ll_expert_major(env.host(recv), env.host(counts), routing, rows, env.rank, experts,
                                                    env.nranks)
            else:
                recv = env.zeros((slots, hidden), torch.float8_e4m3fn)
                recv_scales = env.zeros((slots, scale_elems), torch.float32)
                handle.dispatch(ep.DispatchInputs(x, topk_weights=env.dev(weights[env.rank]), scales=scales),
                                ep.DispatchOutputs(recv, topk_weights=env.zeros((slots,), torch.float32),
                                                   scales=recv_scales),
                                config=ep.DispatchConfig(quant_recipe="fwd"), stream=env.stream)
                torch.cuda.synchronize()
                n = int(env.host(total)[0])
                errors += ref.check_ht_expert_major(env.host(recv)[:n], routing, rows, env.rank, experts, env.nranks)
        finally:
            handle.destroy()
    finally:
        group.destroy()
    return errors


def all_inputs_fp8(env, tokens, top_k, experts, hidden):
    import ep_reference as ref
    routing = [ref.routing(r, tokens, top_k, experts, seed=21) for r in range(env.nranks)]
    rows = [ref.tokens(r, tokens, hidden) for r in range(env.nranks)]  # integers |v| <= 16: exact in e4m3
    weights = [ref.weights(r, tokens, top_k) for r in range(env.nranks)]
    return routing, rows, weights


def custom_allocator(env):
    import ncclbind
    from ncclbind import ep
    torch = env.torch
    allocated = {}

    def alloc(nbytes):
        block = ncclbind.mem_alloc(nbytes)
        allocated[block.ptr] = block
        return block.ptr

    def free(address):
        ncclbind.mem_free(allocated.pop(address))

    allocator = ep.AllocConfig(alloc, free)
    group = make_group(env, "ll", 4 * env.nranks, 2048 * 2, alloc=allocator)
    errors = []
    try:
        env.hidden = 2048
        errors += round_trip(env, group, "expert_major", 16, 2, 4 * env.nranks, torch.bfloat16, torch.int64, seed=5)
        if allocator.calls["alloc"] == 0:
            errors.append("NCCL EP never called the allocator")
    finally:
        group.destroy()
    if allocator.calls["free"] != allocator.calls["alloc"] or allocated:
        errors.append(f"calls {allocator.calls}, {len(allocated)} allocations not freed after destroy")
    print(f"rank {env.rank}: allocator calls {allocator.calls}", flush=True)
    return errors


def mask(env):
    """The active-rank mask on an LL group made with enable_mask (and NCCL_EP_AUTO rdma_buffer_size).
    (a) mask_clean before any LL handle is refused by ncclbind.ep naming the group and the
    precondition rdma_buffer, and this process goes on (libnccl_ep 0.2.0 asserts "rdma_buffer not yet
    allocated; create at least one LL handle first": an uncaught C++ exception that ended the first
    2x H200 run); query and update need enable_mask only. (b) With an LL handle made, query, update
    (a peer masked, then all active again), clean and the async error flag for real, then a round
    trip on the same group."""
    from ncclbind.errors import NcclInvalid
    torch = env.torch
    errors = []
    experts = 4 * env.nranks
    group = make_group(env, "ll", experts, 2048 * 2, enable_mask=1)
    try:
        status = torch.full((env.nranks,), -1, dtype=torch.int32, device="cuda")

        def query():
            status.fill_(-1)
            group.mask_query(status, stream=env.stream)
            torch.cuda.synchronize()
            return status.tolist()

        # (a) no LL handle yet: no RDMA buffer
        if "rdma_buffer" in group.preconditions:
            errors.append(f"preconditions before any handle: {sorted(group.preconditions)}")
        try:
            group.mask_clean(stream=env.stream)
            errors.append("mask_clean before any LL handle: accepted")
        except NcclInvalid as e:
            if e.argument != "group" or "precondition rdma_buffer" not in str(e):
                errors.append(f"mask_clean before any LL handle: {e} (argument {e.argument})")
        if query() != [1] * env.nranks:
            errors.append(f"initial mask {status.tolist()}")
        # (b) an LL handle makes the RDMA buffer (collective); the mask calls for real
        env.hidden = 2048
        routing, _, _ = all_inputs(env, 16, 2, experts, seed=6)
        handle = group.create_handle("expert_major", env.dev(routing[env.rank]), stream=env.stream)
        try:
            if "rdma_buffer" not in group.preconditions:
                errors.append(f"preconditions after create_handle: {sorted(group.preconditions)}")
            expected = [1] * env.nranks
            if env.nranks > 1:
                expected[(env.rank + 1) % env.nranks] = 0  # this rank's own view: a peer masked
            group.mask_update(expected, stream=env.stream)
            if query() != expected:
                errors.append(f"mask after update to {expected}: {status.tolist()}")
            group.mask_update([1] * env.nranks, stream=env.stream)
            if query() != [1] * env.nranks:
                errors.append(f"mask after update to all active: {status.tolist()}")
            group.mask_clean(stream=env.stream)  # collective over the (all active) ranks
            if query() != [1] * env.nranks:
                errors.append(f"mask after clean: {status.tolist()}")
            if group.get_async_error() != 0:
                errors.append("async error set without a timeout")
            group.error_clear()
            if group.get_async_error() != 0:
                errors.append("async error set after error_clear")
        finally:
            torch.cuda.synchronize()
            handle.destroy()
        errors += round_trip(env, group, "expert_major", 16, 2, experts, torch.bfloat16, torch.int64, seed=6)
    finally:
        group.destroy()
    return errors


def rank_main(rank, nranks, port):
    launch.load_named_libraries_first()
    import torch
    import torch.distributed as dist

    import ncclbind
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0)
    uid = ncclbind.UniqueId.share_store(store, rank)
    comm = ncclbind.Communicator.init(nranks, rank, uid, device=rank)
    report = Report(rank)
    try:
        run_checks(Env(torch, comm, rank, nranks), report)
    except Exception:  # noqa: BLE001 - reported, counted
        traceback.print_exc()
        report.result("unexpected exception", ["see the traceback above"])
    finally:
        comm.destroy()
    print(f"rank {rank}/{nranks}: {report.passed} passed, {report.failed} failed, {report.skipped} skipped "
          f"(libnccl {ncclbind.version_code()}, {ncclbind.library_info('nccl_ep').path})", flush=True)
    sys.exit(1 if report.failed else 0)


def main():
    nranks = launch.ranks_to_run(sys.argv[1:], launch.torch_gpu_count())
    if nranks is None:
        return 0
    return launch.run_ranks(rank_main, nranks, (launch.free_port(),), timeout=270, name="ep_ranks")


if __name__ == "__main__":
    sys.exit(main())
