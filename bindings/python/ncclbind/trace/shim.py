"""Control of ncclbind's interposition library (the shim) from inside a traced process.

The shim is preloaded (``python -m ncclbind.trace run -- CMD`` sets LD_PRELOAD), so its
control functions are in the process; this module finds them with ctypes in the process's
global scope (RTLD_DEFAULT) and raises ShimNotPreloadedError, with the line to preload it,
when they are not there::

    import ncclbind.shim as shim
    if shim.loaded():
        shim.enable("counts")
        ...
        print(shim.counters()["ncclAllReduce"])
        shim.flush()

Checkpoint mode (the process started with NCCLBIND_SHIM_CHECKPOINT=1): the program holds the
shim's virtual communicator handles; checkpoint_prepare() drains and destroys every real
communicator and checkpoint_restore() makes them again, with fresh unique ids exchanged
through the job's store, behind the same handles.

NCCLCheckpointError and NCCLCheckpointPreloadError are ShimError and ShimNotPreloadedError
under the names NCCL's checkpoint contrib uses.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

__all__ = ["ShimError", "ShimNotPreloadedError", "NCCLCheckpointError", "NCCLCheckpointPreloadError", "Counter",
           "loaded", "version", "release", "enable", "disable", "mode", "set_gpu_timing", "flush", "trace_path",
           "counters", "reset_counters", "checkpoint_enabled", "checkpoint_prepare", "checkpoint_restore",
           "live_communicators", "MODES"]

MODES = {"off": 0, "counts": 1, "full": 2}
_SHIM_ERRORS = {-1: "invalid argument", -2: "I/O error", -3: "not in this state"}


class ShimError(RuntimeError):
    """A control call of the shim failed. result: the code it returned (a positive value is
    the ncclResult_t NCCL returned, a negative one the shim's own); function: the control
    function; the message names the communicator concerned when there is one."""

    def __init__(self, message: str, result: int = 0, function: str = ""):
        super().__init__(message)
        self.result = result
        self.function = function


class ShimNotPreloadedError(ShimError):
    """The shim's symbols are not in this process: it was not preloaded."""


NCCLCheckpointError = ShimError
NCCLCheckpointPreloadError = ShimNotPreloadedError


@dataclass(frozen=True)
class Counter:
    calls: int
    errors: int
    bytes: int


_SIGNATURES = {
    "ncclbind_shim_version": ([], ctypes.c_int),
    "ncclbind_shim_release": ([], ctypes.c_char_p),
    "ncclbind_shim_set_mode": ([ctypes.c_int], ctypes.c_int),
    "ncclbind_shim_get_mode": ([], ctypes.c_int),
    "ncclbind_shim_set_gpu_timing": ([ctypes.c_int], ctypes.c_int),
    "ncclbind_shim_flush": ([], ctypes.c_int),
    "ncclbind_shim_trace_path": ([], ctypes.c_char_p),
    "ncclbind_shim_function_count": ([], ctypes.c_int),
    "ncclbind_shim_counters": ([ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_uint64),
                                ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int),
    "ncclbind_shim_reset_counters": ([], ctypes.c_int),
    "ncclbind_shim_checkpoint_enabled": ([], ctypes.c_int),
    "ncclbind_shim_checkpoint_prepare": ([], ctypes.c_int),
    "ncclbind_shim_checkpoint_restore": ([], ctypes.c_int),
    "ncclbind_shim_live_comms": ([], ctypes.c_int),
    "ncclbind_shim_last_error": ([], ctypes.c_char_p),
}


def _preload_line() -> str:
    return ("LD_PRELOAD=<ncclbind shim>/libncclbind_shim-nccl-<release>.so NCCLBIND_SHIM_MODE=full python ... "
            "(or: python -m ncclbind.trace run -- python ..., which builds and preloads the right one; "
            "python -m ncclbind.trace library prints its path)")


def _function(name: str):
    process = ctypes.CDLL(None)  # dlopen(NULL): the program and everything loaded RTLD_GLOBAL, preloads first
    try:
        fn = getattr(process, name)
    except AttributeError:
        raise ShimNotPreloadedError(f"the ncclbind shim is not loaded in this process ({name} is not in it): start "
                                    f"the program with {_preload_line()}", function=name) from None
    fn.argtypes, fn.restype = _SIGNATURES[name]
    return fn


def _call(name: str, *args) -> int:
    result = _function(name)(*args)
    if result != 0:
        why = (_function("ncclbind_shim_last_error")() or b"").decode(errors="replace")
        kind = _SHIM_ERRORS.get(result, f"ncclResult_t {result}")
        raise ShimError(f"{name} failed ({kind}): {why}", result=result, function=name)
    return result


def loaded() -> bool:
    """Whether the shim is preloaded in this process."""
    try:
        _function("ncclbind_shim_version")
    except ShimNotPreloadedError:
        return False
    return True


def version() -> int:
    """The shim's control API version."""
    return int(_function("ncclbind_shim_version")())


def release() -> str:
    """The NCCL release the preloaded shim's wrappers are for, e.g. '2.28.9'."""
    return _function("ncclbind_shim_release")().decode()


def enable(mode: str = "full") -> None:
    """Record from now on: 'counts' (per-function counters) or 'full' (every call, to JSONL)."""
    if mode not in MODES:
        raise ShimError(f"mode: {mode!r} is not one of {sorted(MODES)}", result=-1, function="ncclbind_shim_set_mode")
    _call("ncclbind_shim_set_mode", MODES[mode])


def disable() -> None:
    """Stop recording (the wrappers forward and nothing more)."""
    _call("ncclbind_shim_set_mode", MODES["off"])


def mode() -> str:
    current = _function("ncclbind_shim_get_mode")()
    return next(name for name, value in MODES.items() if value == current)


def set_gpu_timing(on: bool = True) -> None:
    """CUDA events around every collective (full mode): the trace's gpu_ms."""
    _call("ncclbind_shim_set_gpu_timing", 1 if on else 0)


def flush() -> None:
    """Write every thread's records to this process's JSONL file now."""
    _call("ncclbind_shim_flush")


def trace_path() -> str:
    """This process's JSONL file ('' until something was written)."""
    return _function("ncclbind_shim_trace_path")().decode()


def counters() -> dict[str, Counter]:
    """{function: Counter(calls, errors, bytes)} for every function called since the start
    (or reset_counters), in counts and full modes."""
    n = _function("ncclbind_shim_function_count")()
    out = {}
    name = ctypes.c_char_p()
    calls, errors, size = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    for i in range(n):
        _call("ncclbind_shim_counters", i, ctypes.byref(name), ctypes.byref(calls), ctypes.byref(errors),
              ctypes.byref(size))
        if calls.value:
            out[name.value.decode()] = Counter(calls.value, errors.value, size.value)
    return out


def reset_counters() -> None:
    _call("ncclbind_shim_reset_counters")


def checkpoint_enabled() -> bool:
    """Whether the process started in checkpoint mode (NCCLBIND_SHIM_CHECKPOINT=1)."""
    return bool(_function("ncclbind_shim_checkpoint_enabled")())


def checkpoint_prepare() -> None:
    """Drain (ncclCommFinalize) and destroy every communicator of the process, keeping how
    each was made; the program's handles stay valid but unusable until checkpoint_restore()."""
    _call("ncclbind_shim_checkpoint_prepare")


def checkpoint_restore() -> None:
    """Make every communicator again (every rank of each must call it) behind the same handles."""
    _call("ncclbind_shim_checkpoint_restore")


def live_communicators() -> int:
    """How many communicators have a real NCCL handle now."""
    return int(_function("ncclbind_shim_live_comms")())
