"""NCCL through ctypes in the process's global scope (the shim's wrappers come first), on
torch's device memory: what the GPU programs of run.sh share. One process per rank, the
unique id passed through a file."""
from __future__ import annotations

import ctypes
import os
import time

import torch

FLOAT32, SUM = 7, 0
process = ctypes.CDLL(None)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(result: int, what: str, rank: int) -> None:
    if result != 0:
        message = process.ncclGetErrorString
        message.restype = ctypes.c_char_p
        raise RuntimeError(f"rank {rank}: {what} failed: {result} ({message(result).decode()})")


def init(rank: int, nranks: int, id_file: str) -> ctypes.c_void_p:
    torch.cuda.set_device(rank % torch.cuda.device_count())
    torch.zeros(1, device="cuda")  # the device's primary context, current on this thread
    uid = UniqueId()
    if rank == 0:
        check(process.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId", rank)
        with open(id_file + ".tmp", "wb") as f:
            f.write(bytes(uid))
        os.replace(id_file + ".tmp", id_file)
    else:
        deadline = time.time() + 120
        while not os.path.exists(id_file):
            if time.time() > deadline:
                raise RuntimeError(f"rank {rank}: no unique id in {id_file}")
            time.sleep(0.01)
        ctypes.memmove(ctypes.byref(uid), open(id_file, "rb").read(), 128)
    comm = ctypes.c_void_p()
    process.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    check(process.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank), "ncclCommInitRank", rank)
    return comm


def stream() -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def all_reduce(comm, send: torch.Tensor, recv: torch.Tensor, rank: int) -> None:
    check(process.ncclAllReduce(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()),
                                ctypes.c_size_t(send.numel()), FLOAT32, SUM, comm, stream()), "ncclAllReduce", rank)


def broadcast(comm, buf: torch.Tensor, root: int, rank: int) -> None:
    check(process.ncclBroadcast(ctypes.c_void_p(buf.data_ptr()), ctypes.c_void_p(buf.data_ptr()),
                                ctypes.c_size_t(buf.numel()), FLOAT32, root, comm, stream()), "ncclBroadcast", rank)


def destroy(comm, rank: int) -> None:
    check(process.ncclCommDestroy(comm), "ncclCommDestroy", rank)


def abort(comm) -> None:
    process.ncclCommAbort(comm)
