"""ncclbind.device.cute: NCCL's device API in CuTe DSL kernels (nvidia-cutlass-dsl), on every
release with a device API: the names, signatures and meanings of nccl4py 0.6.0's
nccl.core.device.cute, over declarations generated from the IR (ncclbind/device/_generated/cute.py).

The kernels link the bitcode of the loaded release: NCCL's lib/libnccl_device.bc from 2.30 on,
ncclbind's C-ABI wrapper built to bitcode by clang before that (2.28, 2.29), so one program runs
on each (see ncclbind.device.cute_ffi). A device function the release lacks is refused while the kernel is traced,
naming the first release that has it.

- Coop (cta, warp, thread, lanes, warp_span): who takes part in a call.
- DevComm: the device communicator (teams, rank conversions, resource buffers, gin()).
- Window: a registered window (local, LSA, peer and multimem pointers; LE info; tensor()).
- Gin: GPU-initiated networking (put, put_value, get, signal, signals and counters, flush).
- Sessions: lsa_session, gin_session, hybrid_session and the defaults built on them.
- Reduce and copy: lsa_reduce_sum, lsa_copy, lsa_reduce_sum_copy, the multimem ones,
  local_reduce_sum_copy.
- runtime: compile-only placeholders (make_fake_dev_comm, ...) for cute.compile without NCCL."""
try:
    import cutlass.cute  # noqa: F401
except ImportError as e:
    raise ImportError("ncclbind.device.cute needs the CuTe DSL: pip install nvidia-cutlass-dsl==4.8.1 "
                      "(with nvidia-cutlass-dsl-libs-cu13 for CUDA 13, -libs-cu12 for CUDA 12)") from e

from . import barrier, coop, comm, gin, handles, reduce_copy, runtime, types, window
from .barrier import *  # noqa: F401,F403
from .comm import *  # noqa: F401,F403
from .coop import *  # noqa: F401,F403
from .gin import *  # noqa: F401,F403
from .handles import *  # noqa: F401,F403
from .reduce_copy import *  # noqa: F401,F403
from .types import *  # noqa: F401,F403
from .window import *  # noqa: F401,F403

__all__ = ["types", "coop", "handles", "comm", "window", "gin", "barrier", "reduce_copy", "runtime",
           *types.__all__, *coop.__all__, *handles.__all__, *comm.__all__, *window.__all__, *gin.__all__,
           *barrier.__all__, *reduce_copy.__all__]
