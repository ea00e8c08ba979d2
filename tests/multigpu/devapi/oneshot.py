"""One-shot all-reduce over a symmetric window with NCCL's device API, compiled from Python
(oneshot_kernel.cu through ncclbind.device.cuda_source), for the device-API benchmark.

    import sys; sys.path.insert(0, "tests/multigpu/devapi")
    from oneshot import OneShotAllReduce
    op = OneShotAllReduce(comm, max_count=1 << 20)     # collective: every rank, same arguments
    op.input[:n] = ...                                 # CuPy float32 array in the symmetric window
    op(out, n)                                         # out: CuPy float32, >= n elements; current CuPy stream
    op.close()                                         # collective

Every rank's op.input[:n] is summed into every rank's out[:n] in one kernel: LSA barrier,
ncclLsaReduceSum (NCCL >= the release the IR's table names; a plain loop over ncclGetLsaPointer
before), LSA barrier. Needs every rank in one LSA team (one NVLink host). float32 only.
"""
from __future__ import annotations

from pathlib import Path

KERNEL_SOURCE = Path(__file__).with_name("oneshot_kernel.cu")


class OneShotAllReduce:
    def __init__(self, comm, max_count: int, *, blocks: int = 8, threads: int = 256):
        import cupy

        import ncclbind
        from ncclbind.device import cuda_source
        from ncclbind.errors import NcclInvalid
        if not isinstance(max_count, int) or max_count <= 0:
            raise NcclInvalid(f"max_count is {max_count!r}; expected an int > 0", "max_count")
        if not isinstance(blocks, int) or not 1 <= blocks <= 1024:
            raise NcclInvalid(f"blocks is {blocks!r}; expected an int in 1..1024", "blocks")
        if not isinstance(threads, int) or threads % 32 or not 32 <= threads <= 1024:
            raise NcclInvalid(f"threads is {threads!r}; expected a multiple of 32 in 32..1024", "threads")
        self.blocks, self.threads, self.max_count = blocks, threads, max_count
        defines = () if "ncclLsaReduceSum_F32" in cuda_source.missing_functions() else \
            ("-DNCCLBIND_HAVE_LSA_REDUCE_SUM",)
        self.uses_lsa_reduce_sum = bool(defines)
        module = cuda_source.compile_module(KERNEL_SOURCE.read_text(), options=defines)
        self._kernel = module.get_function("oneshot_all_reduce_f32")
        self._dev = comm.create_dev_comm(ncclbind.NCCLDevCommRequirements(lsa_barrier_count=blocks))
        self._dev_buffer = cuda_source.dev_comm_buffer(self._dev)
        self.input = ncclbind.empty(max_count, "float32", like="cupy", comm=comm)
        self._window = comm.register_window(self.input, flags=ncclbind._nccl.NCCL_WIN_COLL_SYMMETRIC)
        self._window_arg = cuda_source.window_handle(self._window)
        self._cupy = cupy

    def __call__(self, out, count: int | None = None) -> None:
        """out[:count] = the sum over ranks of input[:count], on CuPy's current stream."""
        import numpy
        from ncclbind.errors import NcclInvalid
        count = self.max_count if count is None else count
        if not isinstance(count, int) or not 0 <= count <= self.max_count:
            raise NcclInvalid(f"count is {count!r}; expected an int in 0..{self.max_count}", "count")
        if getattr(out, "dtype", None) != numpy.float32 or out.size < count:
            raise NcclInvalid(f"out must be a CuPy float32 array of >= {count} elements", "out")
        self._kernel((self.blocks,), (self.threads,),
                     (self._dev_buffer, self._window_arg, numpy.uint64(0), out, numpy.uint64(count)))

    def close(self) -> None:
        """Collective: deregisters the window and destroys the device communicator."""
        self._window.close()
        self._dev.close()
