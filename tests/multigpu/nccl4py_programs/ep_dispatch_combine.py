"""NCCL EP as nccl-extensions documents it: a low-latency group with a caller's allocator
(AllocFn / FreeFn trampolines over cudaMalloc / cudaFree), raw-pointer tensors, expert-major
dispatch, an identity expert step, and combine; each rank checks every token it gets back.

Ranks: MPI (mpirun -np N), one GPU each; without mpirun, one rank."""
import ctypes

import numpy as np
from mpi4py import MPI

import ncclbind as nccl  # an nccl4py / nccl-extensions program: import nccl.core as nccl
import ncclbind.ep as ep  # import nccl.ep as ep

# NCCL EP runs on NCCL 2.32.3 here (NCCLBIND_NCCL_PATH) while torch links its own 2.28.9:
# load ours first, or ncclbind refuses the mix (a machine fact, not part of the API).
print(nccl.get_version().libnccl, "; NCCL EP", ep.get_lib_version(), flush=True)
import torch  # noqa: E402
from cuda.bindings import runtime as cudart  # noqa: E402

mpi = MPI.COMM_WORLD
rank, nranks = mpi.Get_rank(), mpi.Get_size()
torch.cuda.set_device(rank % torch.cuda.device_count())

uid = nccl.get_unique_id(empty=rank != 0)
mpi.Bcast(uid.as_ndarray, root=0)
comm = nccl.Communicator.init(nranks, rank, uid)

allocations = {}


@ep.AllocFn
def cuda_alloc(out_ptr, size, context):
    err, ptr = cudart.cudaMalloc(size)
    out_ptr[0] = ctypes.c_void_p(int(ptr))
    allocations[int(ptr)] = size
    return int(err)


@ep.FreeFn
def cuda_free(ptr, context):
    allocations.pop(int(ptr or 0), None)
    err, = cudart.cudaFree(ptr)
    return int(err)


experts_per_rank, top_k, tokens, hidden, max_tokens = 4, 2, 64, 1024, 128
experts = experts_per_rank * nranks
config = ep.GroupConfig(
    algorithm=ep.Algorithm.LOW_LATENCY, num_experts=experts, max_dispatch_tokens_per_rank=max_tokens,
    max_token_bytes=hidden * 2,
    alloc=ep.AllocConfig(alloc_fn=ctypes.cast(cuda_alloc, ctypes.c_void_p).value,
                         free_fn=ctypes.cast(cuda_free, ctypes.c_void_p).value))
group = ep.Group.create(comm, config)
assert group.ptr and allocations, "the group allocates through the caller's AllocFn"

rng = np.random.default_rng(rank)
routing = np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)]).astype(np.int64)
rows = (np.arange(tokens)[:, None] % 13 + rank + 1).astype(np.float32) * np.ones((1, hidden), np.float32)
weights = np.full((tokens, top_k), 0.25, np.float32)

stream = torch.cuda.current_stream()
topk_idx = torch.from_numpy(routing).cuda()
x = torch.from_numpy(rows).cuda().to(torch.bfloat16)
w = torch.from_numpy(weights).cuda()
recv = torch.zeros((experts_per_rank, nranks * max_tokens, hidden), dtype=torch.bfloat16, device="cuda")
counts = torch.zeros((experts_per_rank,), dtype=torch.int32, device="cuda")
out = torch.zeros((tokens, hidden), dtype=torch.bfloat16, device="cuda")


def raw(t):  # a raw device pointer with its dtype and shape: nccl.ep.Tensor(ptr, dtype=, shape=)
    return ep.Tensor(t.data_ptr(), dtype=nccl.NcclDataType(t.dtype), shape=tuple(t.shape))


handle = group.create_handle(ep.Layout.EXPERT_MAJOR, raw(topk_idx), stream=stream)
handle.dispatch(ep.DispatchInputs(tokens=raw(x)), ep.DispatchOutputs(tokens=raw(recv)),
                layout_info=ep.LayoutInfo(expert_counters=raw(counts)), stream=stream)
torch.cuda.synchronize()
received = int(counts.sum())
# every rank routes top_k experts per token; the experts of this rank receive what all ranks route to them
all_routing = mpi.allgather(routing)
expected_here = sum(int((r // experts_per_rank == rank).sum()) for r in all_routing)
assert received == expected_here, (received, expected_here)

handle.combine(ep.CombineInputs(tokens=raw(recv)), ep.CombineOutputs(tokens=raw(out), topk_weights=raw(w)),
               stream=stream)
handle.complete(stream=stream)
torch.cuda.synchronize()
expected = rows * weights.sum(-1, keepdims=True)  # identity expert step: each token times its weights
error = np.abs(out.float().cpu().numpy() - expected).max()
assert error <= 2e-2 * np.abs(expected).max(), error

handle.destroy()
group.destroy()
assert not allocations, f"the group freed through the caller's FreeFn: {len(allocations)} left"
comm.destroy()
print(f"OK ep_dispatch_combine rank {rank}/{nranks}: {received} tokens in, combine max error {error}", flush=True)
