"""The Python backends one rank runs (worker.py drives them): ncclbind's Communicator,
torch.distributed, CuPy's cupy.cuda.nccl and nccl4py. Each creates its communicator (the
unique id through a file of the rendezvous directory; torch through a FileStore there),
allocates buffers, and calls one collective on views of them on its own stream.

Buffers are torch tensors (CuPy arrays for CuPy; NumPy arrays behind a
__cuda_array_interface__ with --host-memory, which only a stand-in libnccl accepts)."""
from __future__ import annotations

import os
import socket
import time

from .config import DTYPES, OPS


class Unsupported(Exception):
    """This backend cannot run this configuration (e.g. a data type its array library lacks):
    the worker reports it as unavailable, not as a failure."""


def share_bytes(path: str, rank: int, make, timeout_s: float = 300.0) -> bytes:
    """Rank 0 writes make() to `path` (atomically); the other ranks wait for it."""
    if rank == 0:
        data = bytes(make())
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        return data
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: no unique id in {path} after {timeout_s:.0f} s (did rank 0 start?)")
        time.sleep(0.01)
    with open(path, "rb") as f:
        return f.read()


class HostArray:
    """A NumPy array posing as device memory (__cuda_array_interface__), for --host-memory."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.array.shape, "typestr": self.array.dtype.str, "version": 3, "strides": None,
                "data": (self.array.__array_interface__["data"][0], False), "stream": None}


class ArrayOps:
    """Fill, view and compare buffers of one array library (torch, cupy or numpy)."""

    def __init__(self, library: str, dtype: str, device: int):
        self.library, self.dtype_name, self.device = library, DTYPES[dtype][2], device
        if library == "torch":
            import torch
            self.xp, self.dtype = torch, getattr(torch, self.dtype_name)
        elif library == "cupy":
            import cupy
            try:
                self.xp, self.dtype = cupy, cupy.dtype(self.dtype_name)
            except TypeError:
                raise Unsupported(f"-d {dtype}: CuPy has no {self.dtype_name}") from None
        else:
            import numpy
            if not hasattr(numpy, self.dtype_name):
                raise Unsupported(f"-d {dtype}: NumPy has no {self.dtype_name} (--host-memory)")
            self.xp, self.dtype = numpy, numpy.dtype(self.dtype_name)

    def empty(self, n: int):
        if self.library == "torch":
            return self.xp.empty(max(n, 1), dtype=self.dtype, device=f"cuda:{self.device}")
        if self.library == "cupy":
            return self.xp.empty(max(n, 1), dtype=self.dtype)
        return HostArray(self.xp.zeros(max(n, 1), dtype=self.dtype))

    def data(self, buf):
        return buf.array if isinstance(buf, HostArray) else buf

    def view(self, buf, start: int, length: int):
        if isinstance(buf, HostArray):
            return HostArray(buf.array[start:start + length])
        return buf[start:start + length]

    def arange(self, n: int):
        if self.library == "torch":
            return self.xp.arange(n, dtype=self.xp.int64, device=f"cuda:{self.device}")
        return self.xp.arange(n, dtype="int64")

    def store(self, buf, values) -> None:
        target = self.data(buf)
        if self.library == "torch":
            target.copy_(values.to(self.dtype) if hasattr(values, "to") else values)
        else:
            target[...] = values.astype(self.dtype) if hasattr(values, "astype") else values

    def finish(self) -> None:
        """Block until the library's queued work (fill, poison) is done. Torch and CuPy run it on
        their current stream, which the collective's own non-blocking stream does not wait for:
        without this, NCCL reads a send buffer the fill has not written yet, and the fill's
        poisoning of the receive buffer may land after NCCL wrote it."""
        if self.library == "torch":
            self.xp.cuda.synchronize(self.device)
        elif self.library == "cupy":
            self.xp.cuda.Device(self.device).synchronize()

    def poison(self, buf) -> None:
        """Zero: no collective's expected value (every value is >= 1)."""
        target = self.data(buf)
        if self.library == "torch":
            target.zero_()
        else:
            target[...] = 0

    def count_wrong(self, buf, want, tolerance: tuple[float, float]) -> int:
        got = self.data(buf)
        if self.library == "torch":
            g, w = got.double(), want.double()
            bad = (g - w).abs() > (tolerance[0] + tolerance[1] * w.abs())
            bad |= g.isnan()
            return int(bad.sum().item())
        g, w = got.astype("float64"), self.xp.asarray(want).astype("float64")
        bad = self.xp.abs(g - w) > (tolerance[0] + tolerance[1] * self.xp.abs(w))
        bad |= self.xp.isnan(g)
        return int(bad.sum())


class PythonBackend:
    """What worker.py needs from a backend."""
    name = ""
    library = "torch"
    in_place_only: frozenset = frozenset()  # out-of-place columns run in place on the send buffer
    notes: tuple = ()

    def __init__(self, rank: int, nranks: int, device: int, uid_path: str, dtype: str, op: str, register: int,
                 host_memory: bool):
        self.rank, self.nranks, self.device, self.uid_path = rank, nranks, device, uid_path
        self.dtype, self.op, self.register, self.host_memory = dtype, op, register, host_memory
        self.ops = ArrayOps("numpy" if host_memory else self.library, dtype, device)

    def device_info(self) -> dict:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "device": self.device, "pci_bus": 0,
                "device_name": "host memory (stand-in)" if self.host_memory else "?"}
        if not self.host_memory:
            try:
                import torch
                props = torch.cuda.get_device_properties(self.device)
                info["device_name"] = props.name
                info["pci_bus"] = int(getattr(props, "pci_bus_id", 0))
            except Exception:  # noqa: BLE001 - the name is cosmetic
                pass
        return info

    def alloc(self, n: int):
        return self.ops.empty(n)

    def prepare(self, name: str, send, recv, layout, in_place: bool, root: int):
        """A no-argument function that enqueues the collective once."""
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError

    def paths_of(self, run) -> tuple[int, int] | None:
        """run() (untimed calls), and where its calls went: (made by a C fast path, given to a
        slower path), where the backend can tell (ncclbind); None elsewhere."""
        run()
        return None

    def close(self) -> None:
        pass


class NcclbindBackend(PythonBackend):
    name = "ncclbind"

    def __init__(self, *args):
        super().__init__(*args)
        import ncclbind
        self.ncclbind = ncclbind
        if not self.host_memory:
            import torch
            torch.cuda.set_device(self.device)
            self.stream = torch.cuda.Stream()
            self.handle = self.stream.cuda_stream
        else:
            self.stream, self.handle = None, 0
        uid = share_bytes(self.uid_path, self.rank, lambda: ncclbind.get_unique_id().to_bytes())
        self.comm = ncclbind.Communicator.init(self.nranks, self.rank, uid,
                                               device=None if self.host_memory else self.device)
        self.registrations = []
        self.op_value = OPS[self.op]
        self.token = self.ops.empty(1)
        if self.register and self.host_memory:
            self.notes = ("-R with --host-memory: buffers are NumPy memory, registered as they are",)
        elif self.register == 2:
            self.symmetric_pool()  # says in the notes which buffers -R 2 uses

    def alloc(self, n: int):
        if not self.register:
            return self.ops.empty(n)
        if self.register == 2 and not self.host_memory:
            pool_class = self.symmetric_pool()
            if pool_class is not None:  # part of ncclbind: ncclMemAlloc + a symmetric window per pool
                size = DTYPES[self.dtype][1]
                pool = pool_class(self.comm, max(n, 1) * size, dev_comm=False)
                self.registrations.append(pool)
                return pool.as_tensor()[:max(n, 1) * size].view(self.ops.dtype)
        if self.host_memory:
            buf = self.ops.empty(n)
        else:
            buf = self.ncclbind.empty(max(n, 1), DTYPES[self.dtype][2], like="torch", comm=self.comm)
        symmetric = getattr(self.ncclbind._nccl, "NCCL_WIN_COLL_SYMMETRIC", 1)
        self.registrations.append(self.comm.register_buffer(buf) if self.register == 1
                                  else self.comm.register_window(buf, flags=symmetric))
        return buf

    def symmetric_pool(self):
        """ncclbind.symmetric.NcclSymPool where this ncclbind has it, else None (then
        ncclbind.empty + register_window make the same kind of buffer)."""
        try:
            from ncclbind.symmetric import NcclSymPool
        except ImportError:
            return None
        note = "-R 2: buffers are ncclbind.symmetric.NcclSymPool windows"
        if note not in self.notes:
            self.notes = self.notes + (note,)
        return NcclSymPool

    def buffer(self, view, argument: str, writable: bool):
        """What the calls are passed: the torch tensor itself (the C fast path keeps its resolution
        and checks data_ptr() and numel() per call); host memory (--host-memory): an NcclBuffer
        resolved once, since a __cuda_array_interface__ object is resolved again on every call in
        Python (no cache can tell it unchanged), which is not the path GPU buffers take."""
        if not self.host_memory:
            return view
        return self.ncclbind.NcclBuffer.resolve(view, argument, writable=writable)

    def prepare(self, name, send, recv, layout, in_place, root):
        """ncclbind.prepare of the Communicator method: its arguments bound, checked and resolved
        once (as the method checks them on every call), each call made in C: the spelling for a
        loop that repeats one call on the same buffers, as CuPy's row passes raw pointers
        resolved once. bench/python/bench_allreduce.py measures the per-call method too."""
        comm, op, s, prepare = self.comm, self.op_value, self.handle, self.ncclbind.prepare
        same = send is recv
        send = self.buffer(send, "sendbuf", False)
        recv = send if same else self.buffer(recv, "recvbuf", True)
        if name == "all_reduce":
            return prepare(comm.all_reduce, send, recv, op, stream=s)
        if name == "all_gather":
            return prepare(comm.all_gather, send, recv, stream=s)
        if name == "reduce_scatter":
            return prepare(comm.reduce_scatter, send, recv, op, stream=s)
        if name == "broadcast":
            return prepare(comm.broadcast, send, recv, root, stream=s)
        if name == "reduce":
            return prepare(comm.reduce, send, recv, op, root, stream=s)
        if name == "all_to_all":
            return prepare(comm.all_to_all, send, recv, stream=s)
        if name == "send_recv":
            # ncclbind.group_start/group_end, as CuPy's row calls groupStart/groupEnd: the group()
            # context manager is the same two calls under an object and two more Python frames.
            start, end = self.ncclbind.group_start, self.ncclbind.group_end
            nxt, prv = (self.rank + 1) % self.nranks, (self.rank - 1) % self.nranks
            to, frm = prepare(comm.send, send, nxt, stream=s), prepare(comm.recv, recv, prv, stream=s)

            def ring():
                start()
                try:
                    to()
                    frm()
                finally:
                    end()
            return ring
        raise ValueError(name)

    def sync(self):
        if self.stream is not None:
            self.stream.synchronize()

    def paths_of(self, run):
        # counted here, through the extension's path observer (observer(method, made) per call of a
        # fast-path method while set; it costs a Python call, so only untimed calls are observed)
        counts = [0, 0]

        def observe(method, made):
            counts[0 if made else 1] += 1
        previous = self.ncclbind._nccl._set_path_observer(observe)
        try:
            run()
        finally:
            self.ncclbind._nccl._set_path_observer(previous)
        return tuple(counts)

    def barrier(self):
        self.comm.all_reduce(self.token, self.token, stream=self.handle)
        self.sync()

    def close(self):
        self.sync()
        for registration in reversed(self.registrations):
            registration.close()
        self.comm.destroy()


class TorchBackend(PythonBackend):
    name = "torch"
    in_place_only = frozenset({"all_reduce", "broadcast", "reduce"})
    notes = ("torch.distributed has no out-of-place all_reduce, broadcast or reduce: "
             "their out-of-place columns run in place on the send buffer",)

    def __init__(self, *args):
        super().__init__(*args)
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        torch.cuda.set_device(self.device)
        store = dist.FileStore(self.uid_path + ".store", self.nranks)
        dist.init_process_group("nccl", store=store, rank=self.rank, world_size=self.nranks,
                                device_id=torch.device("cuda", self.device))
        ops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
               "min": dist.ReduceOp.MIN, "avg": getattr(dist.ReduceOp, "AVG", None)}
        self.reduce_op = ops[self.op]
        if self.reduce_op is None:
            raise Unsupported("-o avg: this torch.distributed has no ReduceOp.AVG")

    def prepare(self, name, send, recv, layout, in_place, root):
        dist, op = self.dist, self.reduce_op
        if name == "all_reduce":
            call = lambda: dist.all_reduce(send, op)  # noqa: E731 - in place on `send` (see notes)
        elif name == "broadcast":
            call = lambda: dist.broadcast(send, root)  # noqa: E731
        elif name == "reduce":
            call = lambda: dist.reduce(send, root, op)  # noqa: E731
        elif name == "all_gather":
            call = lambda: dist.all_gather_into_tensor(recv, send)  # noqa: E731
        elif name == "reduce_scatter":
            call = lambda: dist.reduce_scatter_tensor(recv, send, op)  # noqa: E731
        elif name == "all_to_all":
            call = lambda: dist.all_to_all_single(recv, send)  # noqa: E731
        elif name == "send_recv":
            nxt, prv = (self.rank + 1) % self.nranks, (self.rank - 1) % self.nranks

            def call():
                for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt),
                                                    dist.P2POp(dist.irecv, recv, prv)]):
                    work.wait()
        else:
            raise ValueError(name)
        return call  # on torch.distributed's own NCCL stream, ordered after the current one, as users call it

    def sync(self):
        self.torch.cuda.synchronize(self.device)

    def barrier(self):
        self.dist.barrier(device_ids=[self.device])
        self.sync()

    def close(self):
        self.sync()
        self.dist.destroy_process_group()


class CupyBackend(PythonBackend):
    name = "cupy"
    library = "cupy"
    notes = ("CuPy has no ncclAlltoAll: all_to_all is a group of send/recv per peer, as NCCL does it",)

    def __init__(self, *args):
        super().__init__(*args)
        import cupy
        from cupy.cuda import nccl
        self.cupy, self.nccl = cupy, nccl
        cupy.cuda.Device(self.device).use()
        uid = share_bytes(self.uid_path, self.rank, lambda: bytes(b & 0xFF for b in nccl.get_unique_id()))
        self.comm = nccl.NcclCommunicator(self.nranks, uid, self.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.token = cupy.zeros(1, dtype=cupy.float32)

    def prepare(self, name, send, recv, layout, in_place, root):
        comm, nccl, dt, op, s = self.comm, self.nccl, DTYPES[self.dtype][0], OPS[self.op], self.stream.ptr
        sp, rp, count = send.data.ptr, recv.data.ptr, layout.count
        if name == "all_reduce":
            return lambda: comm.allReduce(sp, rp, count, dt, op, s)
        if name == "all_gather":
            return lambda: comm.allGather(sp, rp, count, dt, s)
        if name == "reduce_scatter":
            return lambda: comm.reduceScatter(sp, rp, count, dt, op, s)
        if name == "broadcast":
            return lambda: comm.broadcast(sp, rp, count, dt, root, s)
        if name == "reduce":
            return lambda: comm.reduce(sp, rp, count, dt, op, root, s)
        size = DTYPES[self.dtype][1]
        if name == "all_to_all":
            def all_to_all():
                nccl.groupStart()
                try:
                    for peer in range(self.nranks):
                        comm.send(sp + peer * count * size, count, dt, peer, s)
                        comm.recv(rp + peer * count * size, count, dt, peer, s)
                finally:
                    nccl.groupEnd()
            return all_to_all
        if name == "send_recv":
            nxt, prv = (self.rank + 1) % self.nranks, (self.rank - 1) % self.nranks

            def ring():
                nccl.groupStart()
                try:
                    comm.send(sp, count, dt, nxt, s)
                    comm.recv(rp, count, dt, prv, s)
                finally:
                    nccl.groupEnd()
            return ring
        raise ValueError(name)

    def sync(self):
        self.stream.synchronize()

    def barrier(self):
        p = self.token.data.ptr
        self.comm.allReduce(p, p, 1, 7, 0, self.stream.ptr)
        self.sync()

    def close(self):
        self.sync()
        self.comm.destroy()


class Nccl4pyBackend(PythonBackend):
    """nccl4py's nccl.core (get_unique_id, Communicator.init, allreduce, broadcast, reduce,
    allgather, reduce_scatter, alltoall, send/recv in a group), on torch tensors. The unique id
    crosses processes pickled. A call this nccl4py lacks makes the backend unavailable, saying which."""
    name = "nccl4py"

    def __init__(self, *args):
        super().__init__(*args)
        import pickle

        import torch
        import nccl.core as core
        self.torch, self.core = torch, core
        torch.cuda.set_device(self.device)
        data = share_bytes(self.uid_path, self.rank, lambda: pickle.dumps(core.get_unique_id()))
        self.comm = core.Communicator.init(self.nranks, self.rank, pickle.loads(data))
        self.stream = torch.cuda.Stream()
        named = getattr(core, "NcclRedOp", None)
        self.reduce_op = getattr(core, self.op.upper(), None) or (getattr(named, self.op.upper(), None) if named else None)
        if self.reduce_op is None:
            raise Unsupported(f"nccl4py: no reduction op {self.op.upper()} in nccl.core")
        self.sum = getattr(core, "SUM", None) or named.SUM
        self.token = torch.zeros(1, device=f"cuda:{self.device}")

    def method(self, name):
        call = getattr(self.comm, name, None)
        if call is None:
            raise Unsupported(f"nccl4py: Communicator has no {name}")
        return call

    def prepare(self, name, send, recv, layout, in_place, root):
        op, s = self.reduce_op, self.stream.cuda_stream
        if name == "all_reduce":
            f = self.method("allreduce")
            return lambda: f(send, recv, op, stream=s)
        if name == "all_gather":
            f = self.method("allgather")
            return lambda: f(send, recv, stream=s)
        if name == "reduce_scatter":
            f = self.method("reduce_scatter")
            return lambda: f(send, recv, op, stream=s)
        if name == "broadcast":
            f = self.method("broadcast")
            return lambda: f(send, recv, root, stream=s)
        if name == "reduce":
            f = self.method("reduce")
            return lambda: f(send, recv, op, root=root, stream=s)
        if name == "all_to_all":
            f = self.method("alltoall")
            return lambda: f(send, recv, stream=s)
        if name == "send_recv":
            group = getattr(self.core, "group", None)
            if group is None:
                raise Unsupported("nccl4py: nccl.core has no group()")
            nxt, prv = (self.rank + 1) % self.nranks, (self.rank - 1) % self.nranks
            to, frm = self.method("send"), self.method("recv")

            def ring():
                with group():
                    to(send, nxt, stream=s)
                    frm(recv, prv, stream=s)
            return ring
        raise ValueError(name)

    def sync(self):
        self.stream.synchronize()

    def barrier(self):
        self.comm.allreduce(self.token, self.token, self.sum, stream=self.stream.cuda_stream)
        self.sync()

    def close(self):
        self.sync()
        self.comm.destroy()


BACKENDS = {b.name: b for b in (NcclbindBackend, TorchBackend, CupyBackend, Nccl4pyBackend)}
