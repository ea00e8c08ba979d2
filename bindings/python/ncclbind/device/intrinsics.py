"""NCCL's device API in Numba-CUDA kernels.

    from numba import cuda
    from ncclbind.device import intrinsics as nd

    @cuda.jit
    def all_reduce(comm_arg, win_handle, dst, count):
        comm = nd.dev_comm(comm_arg)                   # the ncclDevComm kernel_arg(dev_comm) holds
        win = nd.window(win_handle)                    # kernel_arg(window)
        coop = nd.coop_cta()
        team = comm.team_lsa()
        bar = nd.lsa_barrier_session(coop, comm, team, comm.lsa_barrier(), cuda.blockIdx.x)
        bar.sync(coop, nd.MEMORY_ORDER_RELAXED)
        nd.lsa_reduce_sum(coop, win, 0, dst, count, team)
        bar.sync(coop, nd.MEMORY_ORDER_RELEASE)

Everything reaches NCCL through the C-ABI surface of nccl_device_wrapper.h (c_abi), linked from
the loaded release's wrapper. Types and layouts are those of the release kernels are compiled
for (the loaded libnccl's, or use_nccl_version's). A call the release cannot make is refused when
the kernel is compiled (NcclSymbolNotFoundError: "ncclLsaReduceSum_F32 needs NCCL >= ...").

NCCL name -> here: ncclCoopCta()/Warp()/Thread()/Lanes(mask)/WarpSpan(w0, n, id) -> coop_cta() ...
coop_warp_span(w0, n, id), a ncclCoopAny with .thread_rank() .size() .num_threads() .sync();
ncclTeamWorld/Lsa/Rail(comm) -> comm.team_world()/team_lsa()/team_rail(); comm.rank, .nranks,
.lsa_rank, .lsa_size, .lsa_barrier(), .rail_gin_barrier(), .hybrid_lsa_barrier(),
.hybrid_rail_gin_barrier(), .world_gin_barrier(), .lsa_multimem(); ncclGetPeerPointer(win,
offset, team, peer) -> peer_pointer(win, offset, team, peer, dtype); ncclLsaBarrierSession ->
lsa_barrier_session(...) with .arrive/.wait/.sync(coop, order) and .destroy();
ncclGinBarrierSession(ncclGinAllContexts) -> gin_barrier_session(...).sync(coop, order, fence);
ncclLsaReduceSum / ncclLsaCopy / ncclLsaReduceSumCopy -> lsa_reduce_sum / lsa_copy /
lsa_reduce_sum_copy, the element type from the array's dtype; ncclGin(comm, ctx) -> gin(comm, ctx)
with .put(coop, team, peer, dst_win, dst_off, src_win, src_off, nbytes, remote=GIN_NONE |
GIN_SIGNAL_INC | GIN_SIGNAL_ADD, signal, value, local=GIN_NONE | GIN_COUNTER_INC, counter), .signal,
.wait_signal, .read_signal, .reset_signal, .wait_counter, .read_counter, .reset_counter, .flush;
ncclBarrierSession -> barrier_session(...) / world_barrier_session(coop, comm, gin, index) with
.sync(coop, order, fence); ncclGetMultimemPointer -> multimem_pointer(win, offset, handle, dtype);
ncclMultimemReduceSum / Copy / ReduceSumCopy -> multimem_reduce_sum / multimem_copy /
multimem_reduce_sum_copy."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import NcclInvalid
from . import c_abi, ir_tables, layouts
from .numba_compat import cgutils, cuda, intrinsic, ir, overload_attribute, overload_method, types
from .numba_types import (DevCommRef, DeviceStruct, GinRef, SessionRef, dev_comm_ref, device_struct, gin_type,
                          target_version_code, use_nccl_version, window_ref)

__all__ = ["MEMORY_ORDER_RELAXED", "MEMORY_ORDER_ACQUIRE", "MEMORY_ORDER_RELEASE", "MEMORY_ORDER_ACQ_REL",
           "MEMORY_ORDER_SEQ_CST", "GIN_FENCE", "coop_cta", "coop_warp", "coop_thread", "coop_lanes",
           "coop_warp_span", "dev_comm", "window", "team", "peer_pointer", "lsa_barrier_session",
           "gin_barrier_session", "lsa_reduce_sum", "lsa_copy", "lsa_reduce_sum_copy", "use_nccl_version",
           "reduce_copy_function", "GIN_NONE", "GIN_SIGNAL_INC", "GIN_SIGNAL_ADD", "GIN_COUNTER_INC", "gin",
           "barrier_session", "world_barrier_session", "multimem_pointer", "lsa_multimem_pointer",
           "multimem_reduce_sum", "multimem_copy", "multimem_reduce_sum_copy", "lsa_barrier_session_multimem",
           "local_pointer", "lsa_pointer", "world_peer_pointer", "cft_le_info", "peer_le_info", "multimem_le_info",
           "local_reduce_sum_copy", "gin_with", "THREAD_SCOPE_THREAD", "THREAD_SCOPE_BLOCK", "THREAD_SCOPE_DEVICE",
           "THREAD_SCOPE_SYSTEM", "address"]

# cuda::memory_order (libcu++'s <cuda/std/atomic>, the values of std::memory_order).
MEMORY_ORDER_RELAXED = 0
MEMORY_ORDER_ACQUIRE = 2
MEMORY_ORDER_RELEASE = 3
MEMORY_ORDER_ACQ_REL = 4
MEMORY_ORDER_SEQ_CST = 5


def _enum(name: str) -> dict[str, int]:
    for enum in ir_tables.api()["enums"]:
        if enum["name"] == name:
            return {v["name"]: v["value"] for v in enum["values"]}
    raise NcclInvalid(f"the IR has no enum {name}", "name")


GIN_FENCE = _enum("ncclGinFenceLevel")  # {"None": 0, "Put": 1, "Get": 2, ...}, from the IR


def _default(name: str, param: str) -> int:
    """A parameter's default from the IR (an enum expression such as A::Put | A::Get)."""
    for fn in ir_tables.api()["device_functions"]:
        if fn["name"] == name:
            for p in fn.get("params", ()):
                if p["name"] == param:
                    text = p.get("default") or "0"
                    value = 0
                    for term in text.split("|"):
                        enum, _, member = term.strip().rpartition("::")
                        value |= _enum(enum)[member] if enum else int(member, 0)
                    return value
    raise NcclInvalid(f"{name} has no parameter {param}", "param")


def _ptr() -> Any:
    return ir.IntType(8).as_pointer()


def _cast(context: Any, builder: Any, value: Any, from_type: Any, to_type: Any) -> Any:
    # A record is the same value whichever coop it names (DeviceStruct.coop).
    if isinstance(to_type, DeviceStruct) and to_type.same_record(from_type):
        return value
    return context.cast(builder, value, from_type, to_type)


def _cast_all(context: Any, builder: Any, values: list[Any], from_types: list[Any], to_types: list[Any]) -> list[Any]:
    return [_cast(context, builder, v, f, t) for v, f, t in zip(values, from_types, to_types)]


def _coop_kind(value: Any) -> str | None:
    return value.coop if isinstance(value, (DeviceStruct, SessionRef)) else None


# ---- cooperative groups (ncclCoopAny) -----------------------------------------------------

def _coop_constructor(init: str, arity: int) -> Any:
    """coop_cta() & co.: an ncclCoopAny from ncclCoopAnyInit<Kind>; one with no arguments is a
    coop that holds no state, which its type names (DeviceStruct.coop = Kind)."""
    def typer(typingctx: Any, *args: Any) -> Any:
        code, _, params = c_abi.typed(init)
        coop = device_struct("ncclCoopAny", code, c_abi.coop_kind(init) if arity == 0 else None)
        for a in args:
            if not isinstance(a, types.Integer):
                raise NcclInvalid(f"{init}'s arguments are integers, not {a}", init)

        def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
            slot = cgutils.alloca_once(builder, coop.llvm_type())
            extra = _cast_all(context, builder, list(values), list(sig.args), params[1:])
            c_abi.emit(context, builder, init, code, [builder.bitcast(slot, _ptr())] + extra)
            return builder.load(slot)
        return coop(*args), codegen

    # Numba reads an intrinsic's arity from its typing function's signature.
    if arity == 0:
        def make(typingctx: Any) -> Any:
            return typer(typingctx)
    elif arity == 1:
        def make(typingctx: Any, a: Any) -> Any:
            return typer(typingctx, a)
    else:
        def make(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
            return typer(typingctx, a, b, c)
    return intrinsic(make)


coop_cta = _coop_constructor("ncclCoopAnyInitCta", 0)
coop_cta.__doc__ = "ncclCoopCta(): the thread block, as a ncclCoopAny."
coop_warp = _coop_constructor("ncclCoopAnyInitWarp", 0)
coop_warp.__doc__ = "ncclCoopWarp(): the calling warp, as a ncclCoopAny."
coop_thread = _coop_constructor("ncclCoopAnyInitThread", 0)
coop_thread.__doc__ = "ncclCoopThread(): the calling thread alone, as a ncclCoopAny."
coop_lanes = _coop_constructor("ncclCoopAnyInitLanes", 1)
coop_lanes.__doc__ = "ncclCoopLanes(lane_mask): the lanes of the warp in the mask, as a ncclCoopAny."
coop_warp_span = _coop_constructor("ncclCoopAnyInitWarpSpan", 3)
coop_warp_span.__doc__ = "ncclCoopWarpSpan(warp0, n_warps, id): warps warp0..warp0+n_warps-1 of the block, as a ncclCoopAny."


def _is_coop(value: Any) -> bool:
    return isinstance(value, DeviceStruct) and value.layout.name == "ncclCoopAny"


def _by_pointer(name: str) -> Any:
    """An intrinsic calling `name(const ncclCoopAny *)` on a coop value (stored to the stack)."""
    @intrinsic
    def call(typingctx: Any, coop: Any) -> Any:
        code, result, _ = c_abi.typed(name)

        def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
            slot = cgutils.alloca_once(builder, values[0].type)
            builder.store(values[0], slot)
            return c_abi.emit(context, builder, name, code, [builder.bitcast(slot, _ptr())], coop=_coop_kind(coop))
        return result(coop), codegen
    return call


for _method, _function in (("thread_rank", "ncclCoopThreadRank"), ("size", "ncclCoopSize"),
                           ("num_threads", "ncclCoopNumThreads"), ("sync", "ncclCoopSync")):
    def _register(method: str, call: Any) -> None:
        @overload_method(DeviceStruct, method, target="cuda", inline="always")
        def _impl(coop):
            if _is_coop(coop):
                return lambda coop: call(coop)
            return None
    _register(_method, _by_pointer(_function))
del _method, _function


# ---- the device communicator, teams, windows ---------------------------------------------

dev_comm = dev_comm_ref
window = window_ref


def _comm_call(name: str) -> Any:
    fn = getattr(c_abi, name)
    return lambda comm: fn((comm,))


for _attr, _function in (("rank", "ncclDevComm_Rank"), ("nranks", "ncclDevComm_NRanks"),
                         ("lsa_rank", "ncclDevComm_LsaRank"), ("lsa_size", "ncclDevComm_LsaSize")):
    def _register_attr(attr: str, impl: Any) -> None:
        @overload_attribute(DevCommRef, attr, target="cuda", inline="always")
        def _get(comm):
            return impl
    _register_attr(_attr, _comm_call(_function))

for _method, _function in (("lsa_barrier", "ncclDevComm_LsaBarrier"),
                           ("rail_gin_barrier", "ncclDevComm_RailGinBarrier"),
                           ("hybrid_lsa_barrier", "ncclDevComm_HybridLsaBarrier"),
                           ("hybrid_rail_gin_barrier", "ncclDevComm_HybridRailGinBarrier"),
                           ("world_gin_barrier", "ncclDevComm_WorldGinBarrier"),
                           ("lsa_multimem", "ncclDevComm_LsaMultimem")):
    def _register_method(method: str, impl: Any) -> None:
        @overload_method(DevCommRef, method, target="cuda", inline="always")
        def _call(comm):
            return impl
    _register_method(_method, _comm_call(_function))
del _attr, _method, _function


@intrinsic
def team(typingctx: Any, nranks: Any, rank: Any, stride: Any) -> Any:
    """An ncclTeam {nRanks, rank, stride}, at the IR's field offsets."""
    struct = device_struct("ncclTeam", target_version_code())
    fields = [struct.layout.field(n) for n in ("nRanks", "rank", "stride")]

    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        slot = cgutils.alloca_once(builder, struct.llvm_type())
        base = builder.bitcast(slot, _ptr())
        for f, v, t in zip(fields, values, sig.args):
            where = builder.gep(base, [ir.Constant(ir.IntType(64), f.offset)])
            builder.store(context.cast(builder, v, t, types.int32), builder.bitcast(where, ir.IntType(32).as_pointer()))
        return builder.load(slot)
    return struct(nranks, rank, stride), codegen


# ncclTeamWorld, ncclTeamLsa, ncclTeamRail: the C ABI has no function for them; NCCL defines them
# from the communicator's ranks (world: all ranks; LSA: the ranks sharing memory; rail: one rank
# per LSA team, the same LSA rank).
@overload_method(DevCommRef, "team_world", target="cuda", inline="always")
def _team_world(comm):
    return lambda comm: team(comm.nranks, comm.rank, 1)


@overload_method(DevCommRef, "team_lsa", target="cuda", inline="always")
def _team_lsa(comm):
    return lambda comm: team(comm.lsa_size, comm.lsa_rank, 1)


@overload_method(DevCommRef, "team_rail", target="cuda", inline="always")
def _team_rail(comm):
    return lambda comm: team(comm.nranks // comm.lsa_size, comm.rank // comm.lsa_size, comm.lsa_size)


def _dtype_of(value: Any) -> Any:
    if isinstance(value, (types.NumberClass, types.DType)):
        return value.dtype
    raise NcclInvalid(f"dtype must be a NumPy scalar type (np.float32, ...), not {value}", "dtype")


@intrinsic
def _typed_pointer(typingctx: Any, pointer: Any, dtype: Any) -> Any:
    element = _dtype_of(dtype)

    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        return builder.bitcast(values[0], context.get_value_type(sig.return_type))
    return types.CPointer(element)(pointer, dtype), codegen


def peer_pointer(win: Any, offset: Any, team: Any, peer: Any, dtype: Any) -> Any:  # pragma: no cover
    """ncclGetPeerPointer: `peer`'s (a rank of `team`) memory of window `win` at byte `offset`,
    as a pointer to `dtype` elements (p[i] reads and writes it)."""
    raise NotImplementedError("peer_pointer is for Numba kernels")


from .numba_compat import overload  # noqa: E402


@overload(peer_pointer, target="cuda", inline="always")
def _peer_pointer(win, offset, team_value, peer, dtype):
    def impl(win, offset, team_value, peer, dtype):
        return _typed_pointer(c_abi.ncclGetPeerPointerTeam((win, np.uint64(offset), team_value, np.int32(peer))), dtype)
    return impl


# ---- sessions ----------------------------------------------------------------------------

def _session_constructor(storage: str, init: str, multimem: bool = False) -> Any:
    """An intrinsic: reserve the session's storage in the calling function's frame and call init;
    `multimem`: it also takes the team's multimem handle, and arrives with multicast stores."""
    def build(coop: Any, comm: Any, team_value: Any, handle: Any, index: Any, *mm: Any) -> Any:
        code, _, params = c_abi.typed(init)
        session_type = SessionRef(storage, _coop_kind(coop))
        layout = layouts.storage_layout(storage, code)
        unit = layout.align
        given = [coop, comm, team_value, handle, index]
        for g, p, what in zip(given, params[1:], ("coop", "comm", "team", "handle", "index")):
            if isinstance(p, DeviceStruct) and not p.same_record(g):
                raise NcclInvalid(f"{init}: {what} must be a {p}, not {g}", what)
        extra = params[len(given) + 1:]
        if mm and not (len(extra) == 2 and isinstance(extra[1], DeviceStruct) and extra[1].same_record(mm[0])):
            raise NcclInvalid(f"{init}: mm_handle must be the team's multimem handle ({extra[1:]}), not {mm[0]}",
                              "mm_handle")

        def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
            slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(8 * unit), -(-layout.size // unit)))
            pointer = builder.bitcast(slot, _ptr())
            args = _cast_all(context, builder, list(values[:len(given)]), list(sig.args[:len(given)]),
                             params[1:len(given) + 1])
            if mm:  # multimem on, with the handle given
                tail = [ir.Constant(context.get_value_type(extra[0]), 1), values[len(given)]]
            else:   # the parameters after index keep their C++ defaults (multimem off, an empty handle)
                tail = [ir.Constant(context.get_value_type(p) if not isinstance(p, DeviceStruct) else p.llvm_type(),
                                    None) for p in extra]
            c_abi.emit(context, builder, init, code, [pointer] + args + tail, coop=session_type.coop)
            return pointer
        return session_type(*given, *mm), codegen

    if multimem:
        def make_multimem(typingctx: Any, coop: Any, comm: Any, team_value: Any, handle: Any, index: Any,
                          mm_handle: Any) -> Any:
            return build(coop, comm, team_value, handle, index, mm_handle)
        return intrinsic(make_multimem)

    def make(typingctx: Any, coop: Any, comm: Any, team_value: Any, handle: Any, index: Any) -> Any:
        return build(coop, comm, team_value, handle, index)
    return intrinsic(make)


lsa_barrier_session = _session_constructor("ncclLsaBarrierSession_C", "ncclLsaBarrierSessionInit")
lsa_barrier_session.__doc__ = ("ncclLsaBarrierSession(coop, comm, team, handle, index): a barrier among the "
                               "team's GPUs that share memory; .arrive/.wait/.sync(coop, order), .destroy().")
lsa_barrier_session_multimem = _session_constructor("ncclLsaBarrierSession_C", "ncclLsaBarrierSessionInit",
                                                   multimem=True)
lsa_barrier_session_multimem.__doc__ = ("ncclLsaBarrierSession(coop, comm, team, handle, index, multimem=true, "
                                        "mm_handle): lsa_barrier_session arriving with multicast stores through "
                                        "the team's multimem handle (comm.lsa_multimem() for LSA); the DevComm "
                                        "needs multicast (ncclbind.device.multimem_window refuses it otherwise).")
gin_barrier_session = _session_constructor("ncclGinBarrierSession_C", "ncclGinBarrierSessionInitAllContexts")
gin_barrier_session.__doc__ = ("ncclGinBarrierSession over ncclGinAllContexts(comm) (coop, comm, team, handle, "
                               "index): a barrier through GIN; .sync(coop, order, fence). The DevComm needs GIN: "
                               "check with ncclbind.device.capabilities.require_gin before the launch.")


def _session_function(session: Any, suffix: str) -> Any:
    """The C-ABI intrinsic `<session prefix><suffix>` (ncclLsaBarrierSession + Sync), or None."""
    if not isinstance(session, SessionRef):
        return None
    name = session.storage[:-len("_C")] + suffix
    return getattr(c_abi, name) if name in c_abi.function_names() else None


def _has_fence(name: str) -> bool:
    return any(p["name"] == "fence" for fn in ir_tables.api()["device_functions"] if fn["name"] == name
               for p in fn.get("params", ()))


# GIN and hybrid sessions' sync also take a fence level; its default is the C++ one (the IR's).
_FENCE_DEFAULT = _default("ncclGinBarrierSessionSync", "fence")


def _ordered_method(method: str, suffix: str) -> None:
    # One overload per method name: Numba keeps a single template for a (type, method) pair, so the
    # fenced sync of GIN and hybrid sessions is chosen here too.
    @overload_method(SessionRef, method, target="cuda", inline="always")
    def _ordered(session, coop, order=MEMORY_ORDER_ACQ_REL, fence=_FENCE_DEFAULT):
        fn = _session_function(session, suffix)
        if fn is None:
            return None
        if _has_fence(fn.__name__):
            def fenced(session, coop, order=MEMORY_ORDER_ACQ_REL, fence=_FENCE_DEFAULT):
                fn((session, coop, np.int32(order), np.int32(fence)))
            return fenced

        def impl(session, coop, order=MEMORY_ORDER_ACQ_REL, fence=_FENCE_DEFAULT):
            fn((session, coop, np.int32(order)))
        return impl


for _method, _suffix in (("arrive", "Arrive"), ("wait", "Wait"), ("sync", "Sync")):
    _ordered_method(_method, _suffix)
del _method, _suffix


@overload_method(SessionRef, "destroy", target="cuda", inline="always")
def _destroy(session):
    fn = _session_function(session, "Destroy")
    if fn is None:
        return None

    def impl(session):
        fn((session,))
    return impl


# ---- reduce and copy ---------------------------------------------------------------------

reduce_copy_function = ir_tables.reduce_copy_function


def _numpy_dtype(array: Any) -> Any:
    if not isinstance(array, types.Array):
        raise NcclInvalid(f"expected a device array, not {array}", "dst")
    return np.dtype(str(array.dtype))


@intrinsic
def _data_pointer(typingctx: Any, array: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        return builder.bitcast(context.make_array(sig.args[0])(context, builder, values[0]).data, _ptr())
    return types.voidptr(array), codegen


def lsa_reduce_sum(coop: Any, win: Any, offset: Any, dst: Any, count: Any, team: Any) -> None:  # pragma: no cover
    """ncclLsaReduceSum: dst[:count] = the sum over the team's ranks of their window `win` at byte `offset`."""
    raise NotImplementedError("lsa_reduce_sum is for Numba kernels")


def lsa_copy(coop: Any, src: Any, win: Any, offset: Any, count: Any, team: Any) -> None:  # pragma: no cover
    """ncclLsaCopy: src[:count] into every team rank's window `win` at byte `offset`."""
    raise NotImplementedError("lsa_copy is for Numba kernels")


def lsa_reduce_sum_copy(coop: Any, src_win: Any, src_offset: Any, dst_win: Any, dst_offset: Any, count: Any,
                        team: Any, dtype: Any) -> None:  # pragma: no cover
    """ncclLsaReduceSumCopy: the team's sum of src_win at src_offset into every rank's dst_win at dst_offset."""
    raise NotImplementedError("lsa_reduce_sum_copy is for Numba kernels")


@overload(lsa_reduce_sum, target="cuda", inline="always")
def _lsa_reduce_sum(coop, win, offset, dst, count, team_value):
    fn = getattr(c_abi, reduce_copy_function("ncclLsaReduceSum", _numpy_dtype(dst)))

    def impl(coop, win, offset, dst, count, team_value):
        fn((coop, win, np.uint64(offset), _data_pointer(dst), np.uint64(count), team_value))
    return impl


@overload(lsa_copy, target="cuda", inline="always")
def _lsa_copy(coop, src, win, offset, count, team_value):
    fn = getattr(c_abi, reduce_copy_function("ncclLsaCopy", _numpy_dtype(src)))

    def impl(coop, src, win, offset, count, team_value):
        fn((coop, _data_pointer(src), win, np.uint64(offset), np.uint64(count), team_value))
    return impl


@overload(lsa_reduce_sum_copy, target="cuda", inline="always")
def _lsa_reduce_sum_copy(coop: Any, src_win: Any, src_offset: Any, dst_win: Any, dst_offset: Any, count: Any,
                         team_value: Any, dtype: Any) -> Any:
    fn = getattr(c_abi, reduce_copy_function("ncclLsaReduceSumCopy", np.dtype(str(_dtype_of(dtype)))))

    def impl(coop: Any, src_win: Any, src_offset: Any, dst_win: Any, dst_offset: Any, count: Any,
             team_value: Any, dtype: Any) -> None:
        fn((coop, src_win, np.uint64(src_offset), dst_win, np.uint64(dst_offset), np.uint64(count), team_value))
    return impl


# ---- GIN: ncclGin (the C ABI's ncclGin_C) ---------------------------------------------------
# The calls below reach NCCL's `NCCL_IR_EXTERN_C` functions of nccl_device/gin.h (ncclGin_C_init,
# ncclGinPut_v2, ncclGinSignal_v2, ncclGinWaitSignal, ncclGinFlush, ...), defined by the wrapper
# as nb_<name> (c_abi.symbol). A DevComm without GIN (GIN type NONE: one host) has no context:
# get the kernel's context index from ncclbind.device.gin_context(dev_comm, i), which refuses it
# host-side, before any launch.

# Completion actions of put: the remote one (none, signal += 1, signal += value) and the local one
# (counter += 1 once the source may be reused): ncclGin_None, ncclGin_SignalInc, ncclGin_SignalAdd,
# ncclGin_CounterInc in NCCL's C++ API.
GIN_NONE = 0
GIN_SIGNAL_INC = 1
GIN_SIGNAL_ADD = 2
GIN_COUNTER_INC = 3

_SIGNAL_OP = _enum("ncclGinSignalOp_t")  # {"ncclGinSignalInc": 0, "ncclGinSignalAdd": 1}, from the IR
_SIGNAL_INC_OP = _SIGNAL_OP["ncclGinSignalInc"]
_SIGNAL_ADD_OP = _SIGNAL_OP["ncclGinSignalAdd"]
# cuda::thread_scope (libcu++'s <cuda/std/__atomic/scopes.h>), for put / put_value / signal's
# given_release and required_release: NCCL's C++ API defaults to thread and device.
THREAD_SCOPE_SYSTEM = 0
THREAD_SCOPE_DEVICE = 1
THREAD_SCOPE_BLOCK = 2
THREAD_SCOPE_THREAD = 10


def _backend_mask(code: int) -> int:
    """NCCL_GIN_BACKEND_MASK_ALL of the release's headers (the backends the C++ ncclGin covers)."""
    return int(ir_tables.header_set(ir_tables.header_set_for(code)).get("constants", {})
               .get("NCCL_GIN_BACKEND_MASK_ALL", 0))


@intrinsic
def gin(typingctx: Any, comm: Any, context: Any) -> Any:
    """ncclGin(comm, context): GIN context `context` of the device communicator, in the calling
    thread's frame (ncclGin_C_init). Take `context` from ncclbind.device.gin_context(dev_comm, i)."""
    name = "ncclGin_C_init"
    code, _, params = c_abi.typed(name)
    if not isinstance(comm, DevCommRef):
        raise NcclInvalid(f"gin: comm must be dev_comm(...), not {comm}", "comm")
    if not isinstance(context, types.Integer):
        raise NcclInvalid(f"gin: context must be an integer (ncclbind.device.gin_context), not {context}", "context")
    layout = layouts.record_layout("ncclGin_C", code)
    mask = _backend_mask(code)

    def codegen(context_: Any, builder: Any, sig: Any, values: Any) -> Any:
        unit = layout.align
        slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(8 * unit), -(-layout.size // unit)))
        pointer = builder.bitcast(slot, _ptr())
        index = context_.cast(builder, values[1], sig.args[1], params[3])
        c_abi.emit(context_, builder, name, code, [pointer, ir.Constant(ir.IntType(32), mask), values[0], index])
        return pointer
    return gin_type(comm, context), codegen


@intrinsic
def _null_pointer(typingctx: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        return ir.Constant(_ptr(), None)
    return types.voidptr(), codegen


@overload_method(GinRef, "put", target="cuda", inline="always")
def _gin_put(net, coop, team_value, peer, dst_win, dst_offset, src_win, src_offset, nbytes,
             remote=GIN_NONE, signal=0, value=1, local=GIN_NONE, counter=0, given_release=THREAD_SCOPE_THREAD,
             required_release=THREAD_SCOPE_DEVICE):
    fn = c_abi.ncclGinPut_v2

    def impl(net, coop, team_value, peer, dst_win, dst_offset, src_win, src_offset, nbytes,
             remote=GIN_NONE, signal=0, value=1, local=GIN_NONE, counter=0, given_release=THREAD_SCOPE_THREAD,
             required_release=THREAD_SCOPE_DEVICE):
        op = _SIGNAL_ADD_OP if remote == GIN_SIGNAL_ADD else _SIGNAL_INC_OP
        arg = value if remote == GIN_SIGNAL_ADD else 1
        fn((net, team_value, np.int32(peer), dst_win, np.uint64(dst_offset), src_win, np.uint64(src_offset),
            np.uint64(nbytes), remote != GIN_NONE, np.uint32(signal), np.int32(op), np.uint64(arg),
            local == GIN_COUNTER_INC, np.uint32(counter), coop, False, _null_pointer(),
            np.int32(given_release), np.int32(required_release), np.uint32(0)))
    return impl


@overload_method(GinRef, "signal", target="cuda", inline="always")
def _gin_signal(net, coop, team_value, peer, signal, op=GIN_SIGNAL_INC, value=1, given_release=THREAD_SCOPE_THREAD,
                required_release=THREAD_SCOPE_DEVICE):
    fn = c_abi.ncclGinSignal_v2

    def impl(net, coop, team_value, peer, signal, op=GIN_SIGNAL_INC, value=1, given_release=THREAD_SCOPE_THREAD,
             required_release=THREAD_SCOPE_DEVICE):
        signal_op = _SIGNAL_ADD_OP if op == GIN_SIGNAL_ADD else _SIGNAL_INC_OP
        arg = value if op == GIN_SIGNAL_ADD else 1
        fn((net, team_value, np.int32(peer), True, np.uint32(signal), np.int32(signal_op), np.uint64(arg), coop,
            False, _null_pointer(), np.int32(given_release), np.int32(required_release), np.uint32(0)))
    return impl


@overload_method(GinRef, "wait_signal", target="cuda", inline="always")
def _gin_wait_signal(net, coop, signal, least, bits=64, order=MEMORY_ORDER_ACQUIRE):
    fn = c_abi.ncclGinWaitSignal

    def impl(net, coop, signal, least, bits=64, order=MEMORY_ORDER_ACQUIRE):
        fn((net, coop, np.uint32(signal), np.uint64(least), np.int32(bits), np.int32(order)))
    return impl


@overload_method(GinRef, "read_signal", target="cuda", inline="always")
def _gin_read_signal(net, signal, bits=64, order=MEMORY_ORDER_ACQUIRE):
    fn = c_abi.ncclGinReadSignal

    def impl(net, signal, bits=64, order=MEMORY_ORDER_ACQUIRE):
        return fn((net, np.uint32(signal), np.int32(bits), np.int32(order)))
    return impl


@overload_method(GinRef, "reset_signal", target="cuda", inline="always")
def _gin_reset_signal(net, signal):
    fn = c_abi.ncclGinResetSignal

    def impl(net, signal):
        fn((net, np.uint32(signal)))
    return impl


@overload_method(GinRef, "wait_counter", target="cuda", inline="always")
def _gin_wait_counter(net, coop, counter, least, bits=56, order=MEMORY_ORDER_ACQUIRE):
    fn = c_abi.ncclGinWaitCounter

    def impl(net, coop, counter, least, bits=56, order=MEMORY_ORDER_ACQUIRE):
        fn((net, coop, np.uint32(counter), np.uint64(least), np.int32(bits), np.int32(order)))
    return impl


@overload_method(GinRef, "read_counter", target="cuda", inline="always")
def _gin_read_counter(net, counter, bits=56, order=MEMORY_ORDER_ACQUIRE):
    fn = c_abi.ncclGinReadCounter

    def impl(net, counter, bits=56, order=MEMORY_ORDER_ACQUIRE):
        return fn((net, np.uint32(counter), np.int32(bits), np.int32(order)))
    return impl


@overload_method(GinRef, "reset_counter", target="cuda", inline="always")
def _gin_reset_counter(net, counter):
    fn = c_abi.ncclGinResetCounter

    def impl(net, counter):
        fn((net, np.uint32(counter)))
    return impl


@overload_method(GinRef, "flush", target="cuda", inline="always")
def _gin_flush(net, coop, order=MEMORY_ORDER_ACQUIRE):
    fn = c_abi.ncclGinFlush

    def impl(net, coop, order=MEMORY_ORDER_ACQUIRE):
        fn((net, coop, np.int32(order)))
    return impl


# ---- the hybrid (LSA + GIN) barrier: ncclBarrierSession ----------------------------------------

@intrinsic
def barrier_session(typingctx: Any, coop: Any, net: Any, inner_team: Any, outer_team: Any, inner_handle: Any,
                    outer_handle: Any, index: Any) -> Any:
    """ncclBarrierSession(coop, inner_team, outer_team, gin, inner_handle, outer_handle, index): a
    barrier over the LSA team (inner, ncclLsaBarrierHandle) and, through `net` (gin(...)), across
    the outer team (ncclGinBarrierHandle); .sync(coop, order, fence), .destroy(). For the world:
    world_barrier_session(coop, comm, net, index)."""
    name, storage = "ncclBarrierSessionInit", "ncclBarrierSession_C"
    code, _, params = c_abi.typed(name)
    given = [coop, net, inner_team, outer_team, inner_handle, outer_handle, index]
    # ncclBarrierSessionInit(session, coop, innerTeam, outerTeam, net, innerBarHandle, outerBarHandle, index, ...)
    order = [0, 2, 3, 1, 4, 5, 6]
    what = ["coop", "inner_team", "outer_team", "net", "inner_handle", "outer_handle", "index"]
    for pos, p in enumerate(params[1:8]):
        g = given[order[pos]]
        if isinstance(p, DeviceStruct) and not p.same_record(g):
            raise NcclInvalid(f"{name}: {what[pos]} must be a {p}, not {g}", what[pos])
    if not isinstance(net, GinRef):
        raise NcclInvalid(f"{name}: net must be gin(comm, context), not {net}", "net")
    layout = layouts.storage_layout(storage, code)
    extra = params[8:]
    session_type = SessionRef(storage, _coop_kind(coop))

    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        unit = layout.align
        slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(8 * unit), -(-layout.size // unit)))
        pointer = builder.bitcast(slot, _ptr())
        args = [_cast(context, builder, values[i], sig.args[i], p) for i, p in zip(order, params[1:8])]
        defaults = [ir.Constant(context.get_value_type(p) if not isinstance(p, DeviceStruct) else p.llvm_type(),
                                None) for p in extra]
        c_abi.emit(context, builder, name, code, [pointer] + args + defaults, coop=session_type.coop)
        return pointer
    return session_type(*given), codegen


def world_barrier_session(coop: Any, comm: Any, net: Any, index: Any) -> Any:  # pragma: no cover
    """ncclBarrierSession(coop, ncclTeamTagWorld(), gin, index): barrier_session over the LSA team
    and the rail team with the DevComm's hybrid barrier handles."""
    raise NotImplementedError("world_barrier_session is for Numba kernels")


@overload(world_barrier_session, target="cuda", inline="always")
def _world_barrier_session(coop, comm, net, index):
    def impl(coop, comm, net, index):
        return barrier_session(coop, net, comm.team_lsa(), comm.team_rail(), comm.hybrid_lsa_barrier(),
                               comm.hybrid_rail_gin_barrier(), index)
    return impl


# ---- multimem (NVLS) pointers and the multimem reduce/copy ------------------------------------
# A multimem pointer addresses every LSA peer's copy of a window at once (an NVLS multicast
# object). Take the window from ncclbind.device.multimem_window(dev_comm, window), which refuses a
# DevComm without one host-side (NVLS off, or no lsaMultimem requested).

def multimem_pointer(win: Any, offset: Any, handle: Any, dtype: Any) -> Any:  # pragma: no cover
    """ncclGetMultimemPointer(win, offset, handle): the multicast address of window `win` at byte
    `offset` (handle: comm.lsa_multimem()), as a pointer to `dtype` elements."""
    raise NotImplementedError("multimem_pointer is for Numba kernels")


def lsa_multimem_pointer(win: Any, offset: Any, comm: Any, dtype: Any) -> Any:  # pragma: no cover
    """ncclGetLsaMultimemPointer(win, offset, comm): multimem_pointer with the DevComm's LSA multimem handle."""
    raise NotImplementedError("lsa_multimem_pointer is for Numba kernels")


@overload(multimem_pointer, target="cuda", inline="always")
def _multimem_pointer(win, offset, handle, dtype):
    def impl(win, offset, handle, dtype):
        return _typed_pointer(c_abi.ncclGetMultimemPointer((win, np.uint64(offset), handle)), dtype)
    return impl


@overload(lsa_multimem_pointer, target="cuda", inline="always")
def _lsa_multimem_pointer(win, offset, comm, dtype):
    def impl(win, offset, comm, dtype):
        return _typed_pointer(c_abi.ncclGetLsaMultimemPointer((win, np.uint64(offset), comm)), dtype)
    return impl


def _pointer_dtype(pointer: Any, what: str) -> Any:
    if not isinstance(pointer, types.CPointer):
        raise NcclInvalid(f"{what} must be a typed pointer (multimem_pointer(..., dtype)), not {pointer}", what)
    return np.dtype(str(pointer.dtype))


@intrinsic
def _as_voidptr(typingctx: Any, pointer: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        return builder.bitcast(values[0], _ptr())
    return types.voidptr(pointer), codegen


def multimem_reduce_sum(coop: Any, mc_src: Any, dst: Any, count: Any) -> None:  # pragma: no cover
    """ncclMultimemReduceSum: dst[:count] = the sum over the LSA peers of mc_src[:count] (a multimem pointer)."""
    raise NotImplementedError("multimem_reduce_sum is for Numba kernels")


def multimem_copy(coop: Any, src: Any, mc_dst: Any, count: Any) -> None:  # pragma: no cover
    """ncclMultimemCopy: src[:count] into every LSA peer's memory at mc_dst (a multimem pointer)."""
    raise NotImplementedError("multimem_copy is for Numba kernels")


def multimem_reduce_sum_copy(coop: Any, mc_src: Any, mc_dst: Any, count: Any) -> None:  # pragma: no cover
    """ncclMultimemReduceSumCopy: the peers' sum of mc_src[:count] into every peer's mc_dst."""
    raise NotImplementedError("multimem_reduce_sum_copy is for Numba kernels")


@overload(multimem_reduce_sum, target="cuda", inline="always")
def _multimem_reduce_sum(coop, mc_src, dst, count):
    element = _numpy_dtype(dst)
    if _pointer_dtype(mc_src, "mc_src") != element:
        raise NcclInvalid(f"multimem_reduce_sum: mc_src points to {mc_src.dtype}, dst holds {element}", "mc_src")
    fn = getattr(c_abi, reduce_copy_function("ncclMultimemReduceSum", element))

    def impl(coop, mc_src, dst, count):
        fn((coop, _as_voidptr(mc_src), _data_pointer(dst), np.uint64(count)))
    return impl


@overload(multimem_copy, target="cuda", inline="always")
def _multimem_copy(coop, src, mc_dst, count):
    element = _numpy_dtype(src)
    if _pointer_dtype(mc_dst, "mc_dst") != element:
        raise NcclInvalid(f"multimem_copy: mc_dst points to {mc_dst.dtype}, src holds {element}", "mc_dst")
    fn = getattr(c_abi, reduce_copy_function("ncclMultimemCopy", element))

    def impl(coop, src, mc_dst, count):
        fn((coop, _data_pointer(src), _as_voidptr(mc_dst), np.uint64(count)))
    return impl


@overload(multimem_reduce_sum_copy, target="cuda", inline="always")
def _multimem_reduce_sum_copy(coop, mc_src, mc_dst, count):
    element = _pointer_dtype(mc_src, "mc_src")
    if _pointer_dtype(mc_dst, "mc_dst") != element:
        raise NcclInvalid(f"multimem_reduce_sum_copy: mc_src points to {mc_src.dtype}, mc_dst to {mc_dst.dtype}",
                          "mc_dst")
    fn = getattr(c_abi, reduce_copy_function("ncclMultimemReduceSumCopy", element))

    def impl(coop, mc_src, mc_dst, count):
        fn((coop, _as_voidptr(mc_src), _as_voidptr(mc_dst), np.uint64(count)))
    return impl


# ---- the rest of the C ABI: CFT teams, rank conversions, resource buffers, window pointers,
# logical endpoints, local reduce-copy, GIN's put_value / get / shadows and its options. Each is
# one c_abi call (the IR's prototype); a release without it is refused when the kernel compiles.

@overload_method(DevCommRef, "team_cft", target="cuda", inline="always")
def _team_cft(comm, mode=0):
    """ncclTeamCft(comm, mode): the CFT team in layout `mode` (ncclCftTeamMode_t, default FLAT)."""
    fn = c_abi.ncclTeamCft
    return lambda comm, mode=0: fn((comm, np.int32(mode)))


@overload_method(DevCommRef, "team_cft_multimem", target="cuda", inline="always")
def _team_cft_multimem(comm):
    fn = c_abi.ncclTeamCftMultimem
    return lambda comm: fn((comm,))


@overload_method(DevCommRef, "team_rank_to_world", target="cuda", inline="always")
def _team_rank_to_world(comm, team_value, rank):
    fn = c_abi.ncclTeamRankToWorld
    return lambda comm, team_value, rank: fn((comm, team_value, np.int32(rank)))


@overload_method(DevCommRef, "team_rank_to_lsa", target="cuda", inline="always")
def _team_rank_to_lsa(comm, team_value, rank):
    fn = c_abi.ncclTeamRankToLsa
    return lambda comm, team_value, rank: fn((comm, team_value, np.int32(rank)))


@overload_method(DevCommRef, "resource_buffer_local_pointer", target="cuda", inline="always")
def _rb_local(comm, handle, dtype):
    fn = c_abi.ncclGetResourceBufferLocalPointer
    return lambda comm, handle, dtype: _typed_pointer(fn((comm, np.uint32(handle))), dtype)


@overload_method(DevCommRef, "resource_buffer_lsa_pointer", target="cuda", inline="always")
def _rb_lsa(comm, handle, peer, dtype):
    fn = c_abi.ncclGetResourceBufferLsaPointer
    return lambda comm, handle, peer, dtype: _typed_pointer(fn((comm, np.uint32(handle), np.int32(peer))), dtype)


@overload_method(DevCommRef, "resource_buffer_peer_pointer", target="cuda", inline="always")
def _rb_peer(comm, handle, team_value, peer, dtype):
    fn = c_abi.ncclGetResourceBufferPeerPointer

    def impl(comm, handle, team_value, peer, dtype):
        return _typed_pointer(fn((comm, np.uint32(handle), team_value, np.int32(peer))), dtype)
    return impl


@overload_method(DevCommRef, "resource_buffer_multimem_pointer", target="cuda", inline="always")
def _rb_multimem(comm, handle, mm_handle, dtype):
    fn = c_abi.ncclGetResourceBufferMultimemPointer
    return lambda comm, handle, mm_handle, dtype: _typed_pointer(fn((comm, np.uint32(handle), mm_handle)), dtype)


@overload_method(DevCommRef, "resource_buffer_lsa_multimem_pointer", target="cuda", inline="always")
def _rb_lsa_multimem(comm, handle, dtype):
    fn = c_abi.ncclGetResourceBufferLsaMultimemPointer
    return lambda comm, handle, dtype: _typed_pointer(fn((comm, np.uint32(handle))), dtype)


def local_pointer(win: Any, offset: Any, dtype: Any) -> Any:  # pragma: no cover
    """ncclGetLocalPointer: this rank's memory of window `win` at byte `offset`, as a pointer to `dtype`."""
    raise NotImplementedError("local_pointer is for Numba kernels")


def lsa_pointer(win: Any, offset: Any, peer: Any, dtype: Any) -> Any:  # pragma: no cover
    """ncclGetLsaPointer: LSA rank `peer`'s memory of window `win` at byte `offset`."""
    raise NotImplementedError("lsa_pointer is for Numba kernels")


def world_peer_pointer(win: Any, offset: Any, peer: Any, dtype: Any) -> Any:  # pragma: no cover
    """ncclGetPeerPointer(win, offset, peer): world rank `peer`'s memory of window `win` at byte `offset`."""
    raise NotImplementedError("world_peer_pointer is for Numba kernels")


@overload(local_pointer, target="cuda", inline="always")
def _local_pointer(win, offset, dtype):
    fn = c_abi.ncclGetLocalPointer
    return lambda win, offset, dtype: _typed_pointer(fn((win, np.uint64(offset))), dtype)


@overload(lsa_pointer, target="cuda", inline="always")
def _lsa_pointer(win, offset, peer, dtype):
    fn = c_abi.ncclGetLsaPointer
    return lambda win, offset, peer, dtype: _typed_pointer(fn((win, np.uint64(offset), np.int32(peer))), dtype)


@overload(world_peer_pointer, target="cuda", inline="always")
def _world_peer_pointer(win, offset, peer, dtype):
    fn = c_abi.ncclGetPeerPointer
    return lambda win, offset, peer, dtype: _typed_pointer(fn((win, np.uint64(offset), np.int32(peer))), dtype)


def cft_le_info(win: Any, offset: Any, peer_cft: Any, cft_team: Any, comm: Any) -> Any:  # pragma: no cover
    """ncclGetCftLeInfo: (le_id, le_offset) of `cft_team` rank `peer_cft` for window `win` at byte `offset`."""
    raise NotImplementedError("cft_le_info is for Numba kernels")


def peer_le_info(win: Any, offset: Any, peer: Any, comm: Any) -> Any:  # pragma: no cover
    """ncclGetPeerLeInfo: (le_id, le_offset) of world rank `peer` (in the flat CFT team)."""
    raise NotImplementedError("peer_le_info is for Numba kernels")


def multimem_le_info(win: Any, offset: Any, comm: Any) -> Any:  # pragma: no cover
    """ncclGetMultimemLeInfo: the multicast (le_id, le_offset) of window `win` at byte `offset`."""
    raise NotImplementedError("multimem_le_info is for Numba kernels")


@overload(cft_le_info, target="cuda", inline="always")
def _cft_le_info(win, offset, peer_cft, cft_team, comm):
    fn = c_abi.ncclGetCftLeInfo

    def impl(win, offset, peer_cft, cft_team, comm):
        le_id, le_offset = cuda.local.array(1, np.uint32), cuda.local.array(1, np.uint64)
        fn((win, np.uint64(offset), np.int32(peer_cft), cft_team, comm, _data_pointer(le_id), _data_pointer(le_offset)))
        return le_id[0], le_offset[0]
    return impl


@overload(peer_le_info, target="cuda", inline="always")
def _peer_le_info(win, offset, peer, comm):
    fn = c_abi.ncclGetPeerLeInfo

    def impl(win, offset, peer, comm):
        le_id, le_offset = cuda.local.array(1, np.uint32), cuda.local.array(1, np.uint64)
        fn((win, np.uint64(offset), np.int32(peer), comm, _data_pointer(le_id), _data_pointer(le_offset)))
        return le_id[0], le_offset[0]
    return impl


@overload(multimem_le_info, target="cuda", inline="always")
def _multimem_le_info(win, offset, comm):
    fn = c_abi.ncclGetMultimemLeInfo

    def impl(win, offset, comm):
        le_id, le_offset = cuda.local.array(1, np.uint32), cuda.local.array(1, np.uint64)
        fn((win, np.uint64(offset), comm, _data_pointer(le_id), _data_pointer(le_offset)))
        return le_id[0], le_offset[0]
    return impl


def _resource_le_info(method: str, function: str, arity: int) -> None:
    @overload_method(DevCommRef, method, target="cuda", inline="always")
    def _le(comm, handle, peer=0):
        fn = getattr(c_abi, function)
        if arity == 2:
            def impl(comm, handle, peer=0):
                le_id, le_offset = cuda.local.array(1, np.uint32), cuda.local.array(1, np.uint64)
                fn((comm, np.uint32(handle), _data_pointer(le_id), _data_pointer(le_offset)))
                return le_id[0], le_offset[0]
            return impl

        def impl_peer(comm, handle, peer=0):
            le_id, le_offset = cuda.local.array(1, np.uint32), cuda.local.array(1, np.uint64)
            fn((comm, np.uint32(handle), np.int32(peer), _data_pointer(le_id), _data_pointer(le_offset)))
            return le_id[0], le_offset[0]
        return impl_peer


for _method, _function, _arity in (("resource_buffer_cft_le_info", "ncclGetResourceBufferCftLeInfo", 3),
                                   ("resource_buffer_peer_le_info", "ncclGetResourceBufferPeerLeInfo", 3),
                                   ("resource_buffer_multimem_le_info", "ncclGetResourceBufferMultimemLeInfo", 2)):
    _resource_le_info(_method, _function, _arity)
del _method, _function, _arity


def local_reduce_sum_copy(coop: Any, n_src: Any, src_base: Any, src_displ: Any, n_dst: Any, dst_base: Any,
                          dst_displ: Any, count: Any) -> None:  # pragma: no cover
    """ncclLocalReduceSumCopy: the sum of the `n_src` local buffers src_base + i * src_displ (bytes)
    into each of the `n_dst` buffers dst_base + j * dst_displ, `count` elements (the arrays' dtype)."""
    raise NotImplementedError("local_reduce_sum_copy is for Numba kernels")


@overload(local_reduce_sum_copy, target="cuda", inline="always")
def _local_reduce_sum_copy(coop, n_src, src_base, src_displ, n_dst, dst_base, dst_displ, count):
    element = _numpy_dtype(src_base)
    if _numpy_dtype(dst_base) != element:
        raise NcclInvalid(f"local_reduce_sum_copy: src_base holds {element}, dst_base {_numpy_dtype(dst_base)}",
                          "dst_base")
    fn = getattr(c_abi, reduce_copy_function("ncclLocalReduceSumCopy", element))

    def impl(coop, n_src, src_base, src_displ, n_dst, dst_base, dst_displ, count):
        fn((coop, np.int32(n_src), _data_pointer(src_base), np.uint64(src_displ), np.int32(n_dst),
            _data_pointer(dst_base), np.uint64(dst_displ), np.uint64(count)))
    return impl


@intrinsic
def gin_with(typingctx: Any, comm: Any, context: Any, backend_mask: Any, sharing_mode: Any) -> Any:
    """ncclGin(comm, context) with the backends of `backend_mask` (NCCL_GIN_BACKEND_MASK_* bits) and
    resource sharing `sharing_mode` (ncclGinResourceSharingMode: 0 GPU, 1 CTA, 2 thread), through
    ncclGin_C_initWithResourceSharingMode (NCCL 2.30.7 on). `gin(comm, context)` is the C++ default."""
    name = "ncclGin_C_initWithResourceSharingMode"
    code, _, params = c_abi.typed(name)
    if not isinstance(comm, DevCommRef):
        raise NcclInvalid(f"gin_with: comm must be dev_comm(...), not {comm}", "comm")
    for value, what in ((context, "context"), (backend_mask, "backend_mask"), (sharing_mode, "sharing_mode")):
        if not isinstance(value, types.Integer):
            raise NcclInvalid(f"gin_with: {what} must be an integer, not {value}", what)
    layout = layouts.record_layout("ncclGin_C", code)

    def codegen(context_: Any, builder: Any, sig: Any, values: Any) -> Any:
        unit = layout.align
        slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(8 * unit), -(-layout.size // unit)))
        pointer = builder.bitcast(slot, _ptr())
        mask, index, mode = (context_.cast(builder, values[i], sig.args[i], params[j]) for i, j in ((2, 1), (1, 3),
                                                                                                      (3, 4)))
        c_abi.emit(context_, builder, name, code, [pointer, mask, values[0], index, mode])
        return pointer
    return gin_type(comm, context, backend_mask, sharing_mode), codegen


@overload_method(GinRef, "put_value", target="cuda", inline="always")
def _gin_put_value(net, coop, team_value, peer, dst_win, dst_offset, value, nbytes, remote=GIN_NONE, signal=0,
                   signal_value=1, given_release=THREAD_SCOPE_THREAD, required_release=THREAD_SCOPE_DEVICE):
    """ncclGinPutValue_v2: the low `nbytes` (1-8) of `value` to `dst_win` at `dst_offset` on `team`
    rank `peer`, then the remote completion action (GIN_NONE, GIN_SIGNAL_INC, GIN_SIGNAL_ADD)."""
    fn = c_abi.ncclGinPutValue_v2

    def impl(net, coop, team_value, peer, dst_win, dst_offset, value, nbytes, remote=GIN_NONE, signal=0,
             signal_value=1, given_release=THREAD_SCOPE_THREAD, required_release=THREAD_SCOPE_DEVICE):
        op = _SIGNAL_ADD_OP if remote == GIN_SIGNAL_ADD else _SIGNAL_INC_OP
        arg = signal_value if remote == GIN_SIGNAL_ADD else 1
        fn((net, team_value, np.int32(peer), dst_win, np.uint64(dst_offset), np.uint64(value), np.uint64(nbytes),
            remote != GIN_NONE, np.uint32(signal), np.int32(op), np.uint64(arg), coop, False, _null_pointer(),
            np.int32(given_release), np.int32(required_release), np.uint32(0)))
    return impl


@overload_method(GinRef, "get", target="cuda", inline="always")
def _gin_get(net, coop, team_value, peer, remote_win, remote_offset, local_win, local_offset, nbytes):
    """ncclGinGet: `nbytes` of `team` rank `peer`'s `remote_win` at `remote_offset` into this
    rank's `local_win` at `local_offset` (complete after flush)."""
    fn = c_abi.ncclGinGet

    def impl(net, coop, team_value, peer, remote_win, remote_offset, local_win, local_offset, nbytes):
        fn((net, team_value, np.int32(peer), remote_win, np.uint64(remote_offset), local_win, np.uint64(local_offset),
            np.uint64(nbytes), coop, False, _null_pointer(), np.uint32(0)))
    return impl


@overload_method(GinRef, "signal_shadow_pointer", target="cuda", inline="always")
def _gin_signal_shadow_pointer(net, signal):
    """ncclGinGetSignalShadowPtr: the address of local signal `signal`'s shadow (uint64)."""
    fn = c_abi.ncclGinGetSignalShadowPtr
    return lambda net, signal: _typed_pointer(fn((net, np.uint32(signal))), np.uint64)


@intrinsic
def address(typingctx: Any, pointer: Any) -> Any:
    """A device pointer (peer_pointer(...), local_pointer(...), ...) as its uint64 address."""
    if not isinstance(pointer, (types.CPointer, types.RawPointer)):
        raise NcclInvalid(f"address: a pointer (peer_pointer(...) and the like), not {pointer}", "pointer")

    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        return builder.ptrtoint(values[0], ir.IntType(64))
    return types.uint64(pointer), codegen
