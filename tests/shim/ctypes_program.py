"""A Python program that calls NCCL through ctypes in its own process (as a framework's
C++ would), for the shim's tests: run it under `python -m ncclbind.trace run`.

    ctypes_program.py collectives N [--nranks R --rank K] [--then-broadcast]
    ctypes_program.py checkpoint
    ctypes_program.py hang SECONDS [--abort]
prints "issued <function> <calls> <bytes>" lines and "ok"."""
from __future__ import annotations

import ctypes
import os
import sys

process = ctypes.CDLL(None)  # the shim's wrappers (preloaded) come first, as for a linked program
FLOAT32, SUM = 7, 0


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(result: int, what: str) -> None:
    if result != 0:
        sys.exit(f"{what} failed: {result}")


def make_comm(nranks: int = 1, rank: int = 0) -> ctypes.c_void_p:
    uid = UniqueId()
    check(process.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    comm = ctypes.c_void_p()
    process.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    check(process.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank), "ncclCommInitRank")
    return comm


def all_reduce(comm, send, recv, count: int) -> int:
    return process.ncclAllReduce(send, recv, ctypes.c_size_t(count), FLOAT32, SUM, comm, None)


def collectives(argv) -> None:
    n = int(argv[0])
    nranks = int(argv[argv.index("--nranks") + 1]) if "--nranks" in argv else 1
    rank = int(argv[argv.index("--rank") + 1]) if "--rank" in argv else 0
    comm = make_comm(nranks, rank)
    send = (ctypes.c_float * 4)(1, 2, 3, 4)
    recv = (ctypes.c_float * 4)()
    for _ in range(n):
        check(all_reduce(comm, send, recv, 4), "ncclAllReduce")
    print(f"issued ncclAllReduce {n} {16 * n}")
    if "--then-broadcast" in argv:
        check(process.ncclBroadcast(send, recv, ctypes.c_size_t(4), FLOAT32, 0, comm, None), "ncclBroadcast")
        print("issued ncclBroadcast 1 16")
    check(process.ncclCommDestroy(comm), "ncclCommDestroy")
    print("ok")


def checkpoint() -> None:
    import ncclbind.shim as shim
    comm = make_comm()
    send = (ctypes.c_float * 4)(1, 2, 3, 4)
    recv = (ctypes.c_float * 4)()
    handle = ctypes.c_void_p()
    check(process.ncclCommRegister(comm, send, ctypes.c_size_t(16), ctypes.byref(handle)), "ncclCommRegister")
    try:
        shim.checkpoint_prepare()
        sys.exit("prepare went ahead with a live registration")
    except shim.NCCLCheckpointError as e:
        print(f"refused: {e}")
    check(process.ncclCommDeregister(comm, handle), "ncclCommDeregister")
    for step in range(6):
        if step == 3:
            shim.checkpoint_prepare()
            print(f"prepared: {shim.live_communicators()} live")
            shim.checkpoint_restore()
            print(f"restored: {shim.live_communicators()} live")
        recv[:] = [0, 0, 0, 0]
        check(all_reduce(comm, send, recv, 4), f"ncclAllReduce step {step}")
        assert list(recv) == [1, 2, 3, 4], list(recv)
    print("issued ncclAllReduce 6 96")
    check(process.ncclCommDestroy(comm), "ncclCommDestroy")
    print("ok")


def hang(argv) -> None:
    """An all-reduce that never returns (the stand-in's fakeHangNextAllReduce) in a thread;
    with --abort the main thread aborts the communicator after a while, which ends it."""
    import threading
    import time
    comm = make_comm()
    process.fakeHangNextAllReduce()
    send = (ctypes.c_float * 4)(1, 2, 3, 4)
    recv = (ctypes.c_float * 4)()
    caller = threading.Thread(target=all_reduce, args=(comm, send, recv, 4), daemon=True)
    caller.start()
    print("hanging", flush=True)
    time.sleep(float(argv[0]))
    if "--abort" in argv:
        process.ncclCommAbort(comm)
        caller.join()
        print("aborted", flush=True)
    else:
        time.sleep(3600)


if __name__ == "__main__":
    {"collectives": collectives, "checkpoint": lambda argv: checkpoint(), "hang": hang}[sys.argv[1]](sys.argv[2:])
