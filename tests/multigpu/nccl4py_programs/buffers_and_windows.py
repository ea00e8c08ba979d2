"""MPI: a configured communicator, user-buffer registration and symmetric windows."""
import cupy as cp
from mpi4py import MPI

import ncclbind as nccl  # an nccl4py program: import nccl.core as nccl

mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()

uid = nccl.get_unique_id() if rank == 0 else None
uid = mpi.bcast(uid, root=0)  # a UniqueId pickles
config = nccl.NCCLConfig(cta_policy=nccl.CTAPolicy.EFFICIENCY, comm_name="nccl4py-program")
comm = nccl.Communicator.init(nranks, rank, uid, config)

n = 1 << 16
registered = nccl.cupy.empty(n, dtype=cp.float32)  # ncclMemAlloc memory
registered[:] = rank + 1
handle = comm.register_buffer(registered)
comm.allreduce(registered, registered, nccl.SUM)
cp.cuda.Device().synchronize()
assert bool(cp.all(registered == nranks * (nranks + 1) / 2)), registered[:4].get()

windowed = nccl.cupy.empty(n, dtype=cp.float32)
windowed[:] = 1
window = comm.register_window(windowed, nccl.WindowFlag.CollSymmetric)  # collective
out = nccl.cupy.empty(n, dtype=cp.float32)
out_window = comm.register_window(out, nccl.WindowFlag.CollSymmetric)
comm.allreduce(windowed, out, nccl.SUM)
cp.cuda.Device().synchronize()
assert bool(cp.all(out == nranks)), out[:4].get()

raw = nccl.mem_alloc(n * 4)  # nccl4py's mem_alloc(size): a buffer; a view of it as float32
view = cp.ndarray((n,), dtype=cp.float32, memptr=cp.cuda.MemoryPointer(
    cp.cuda.UnownedMemory(raw.handle, raw.size, raw), 0))
view[:] = 2
comm.broadcast(view, view, root=0)
cp.cuda.Device().synchronize()
assert bool(cp.all(view == 2))

comm.close_all_resources()  # the handle and both windows are released; the communicator stays
assert window.closed and out_window.closed
comm.allreduce(windowed, windowed, nccl.SUM)
cp.cuda.Device().synchronize()
assert bool(cp.all(windowed == nranks))
nccl.mem_free(raw)
comm.destroy()
print(f"OK buffers_and_windows rank {rank}/{nranks}", flush=True)
