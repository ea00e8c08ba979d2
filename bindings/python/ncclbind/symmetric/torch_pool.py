"""torch_pool(comm): ordinary torch allocations in ncclMemAlloc memory, which NCCL can
register as symmetric windows.

    with ncclbind.torch_pool(comm) as pool:       # torch.cuda.MemPool over ncclMemAlloc
        x = torch.empty(1 << 20, device="cuda")   # any torch allocation on comm's device
        y = torch.zeros(4096, device="cuda")
    pool.register_windows()                       # collective: one symmetric window per segment
    comm.all_reduce(x)                            # inside a window: symmetric kernels apply
    ...
    pool.close()                                  # deregisters the windows (collective)

The memory comes from torch's caching allocator, in a torch.cuda.MemPool whose
allocator is a torch.cuda.memory.CUDAPluggableAllocator over a small shared object of
ncclbind (torch_allocator.c: ncclbind_symmetric_alloc / ncclbind_symmetric_free, which
call ncclMemAlloc / ncclMemFree through ncclbind's runtime). setup.py builds it with the
extension at `pip install .` (ncclbind/symmetric/_torch_allocator*.so);
NCCLBIND_TORCH_ALLOCATOR names another build of it.

torch's allocator carves tensors out of segments (2 MiB and up); a segment, not a
tensor, is what register_windows() registers, one window per segment, in the order the
segments were allocated. Window registration is collective: every rank must have made
the same allocations in the same order (then the segments, their sizes and the tensors'
offsets in them agree, which the symmetric kernels need too). Segments stay allocated
while the pool lives (torch frees a pool's segments only once the pool is gone and its
cache emptied); close() deregisters the windows before that can happen.
"""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os

from ..errors import NcclInvalid

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..core.communicator import Communicator
    from ..core.resources import RegisteredWindowHandle

ALLOC_FUNCTION = "ncclbind_symmetric_alloc"
FREE_FUNCTION = "ncclbind_symmetric_free"
LIBRARY_ENV = "NCCLBIND_TORCH_ALLOCATOR"


def allocator_library() -> str:
    """The path of the pluggable allocator's shared object: NCCLBIND_TORCH_ALLOCATOR,
    else the one setup.py built next to this module."""
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        if not os.path.isfile(explicit):
            raise FileNotFoundError(f"{LIBRARY_ENV}={explicit!r} is not a file")
        return os.path.abspath(explicit)
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_torch_allocator*.so")))
    if not found:
        raise FileNotFoundError(
            f"ncclbind's torch allocator (ncclbind/symmetric/_torch_allocator*.so) is not built in {here}: "
            f"install ncclbind with `pip install .` (setup.py builds it), or set {LIBRARY_ENV} to a build of "
            "bindings/python/ncclbind/symmetric/torch_allocator.c")
    return found[0]


class AllocatorLibrary:
    """The shared object through ctypes: its counters and its live blocks."""

    def __init__(self, path: str | None = None):
        self.path = path or allocator_library()
        self.library = ctypes.CDLL(self.path)
        self.library.ncclbind_symmetric_live_blocks.restype = ctypes.c_size_t
        self.library.ncclbind_symmetric_live_blocks.argtypes = [
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_long),
            ctypes.c_size_t]
        self.library.ncclbind_symmetric_last_error.restype = ctypes.c_char_p
        self.library.ncclbind_symmetric_alloc.restype = ctypes.c_void_p
        self.library.ncclbind_symmetric_alloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.library.ncclbind_symmetric_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                                         ctypes.c_void_p]

    def counts(self) -> tuple[int, int, int]:
        """(allocations, frees, failed calls) so far."""
        values = [ctypes.c_long() for _ in range(3)]
        self.library.ncclbind_symmetric_counts(*(ctypes.byref(v) for v in values))
        return tuple(v.value for v in values)

    def live_blocks(self) -> list[tuple[int, int]]:
        """(address, size) of every block allocated and not freed, oldest first."""
        capacity = 64
        while True:
            ptrs = (ctypes.c_void_p * capacity)()
            sizes = (ctypes.c_size_t * capacity)()
            seqs = (ctypes.c_long * capacity)()
            n = self.library.ncclbind_symmetric_live_blocks(ptrs, sizes, seqs, capacity)
            if n <= capacity:
                return [(ptrs[i] or 0, sizes[i]) for i in range(n)]
            capacity = n + 64

    def last_result(self) -> int:
        return self.library.ncclbind_symmetric_last_result()

    def last_error(self) -> str:
        return (self.library.ncclbind_symmetric_last_error() or b"").decode(errors="replace")


class TorchSymmetricPool:
    """A torch.cuda.MemPool (`mem_pool`) over ncclMemAlloc for comm's device, and the
    symmetric windows registered over its segments (`windows`: address -> handle).
    Use it with `with pool:` (or ncclbind.torch_pool(comm)) to allocate from it."""

    def __init__(self, comm: Communicator, *, flags: int | None = None):
        from .. import _nccl
        from ..core.communicator import Communicator
        if not isinstance(comm, Communicator):
            raise NcclInvalid(f"comm must be a Communicator, not {type(comm).__name__}", "comm")
        comm._live()
        import torch
        self.comm = comm
        self.device = comm.device
        self.flags = int(_nccl.NCCL_WIN_COLL_SYMMETRIC) if flags is None else flags
        self.library = AllocatorLibrary()
        self._pluggable = torch.cuda.memory.CUDAPluggableAllocator(self.library.path, ALLOC_FUNCTION, FREE_FUNCTION)
        self.mem_pool = torch.cuda.MemPool(self._pluggable.allocator())
        self.windows: dict[int, RegisteredWindowHandle] = {}
        self._uses: list = []

    @contextlib.contextmanager
    def use(self) -> Iterator[TorchSymmetricPool]:
        """Route torch's allocations on comm's device to this pool inside the block."""
        import torch
        with torch.cuda.use_mem_pool(self.mem_pool, device=torch.device("cuda", self.device)):
            yield self

    def __enter__(self) -> TorchSymmetricPool:
        use = self.use()
        result = use.__enter__()
        self._uses.append(use)
        return result

    def __exit__(self, *exc) -> None:
        self._uses.pop().__exit__(*exc)

    def segments(self) -> list[tuple[int, int]]:
        """(address, size) of this pool's segments, in the order ncclMemAlloc made them."""
        mine = self._snapshot_addresses()
        return [(address, size) for address, size in self.library.live_blocks()
                if mine is None or address in mine]

    def _snapshot_addresses(self) -> set | None:
        snapshot = getattr(self.mem_pool, "snapshot", None)
        if snapshot is None:
            return None
        pool_id = getattr(self.mem_pool, "id", None)
        addresses = set()
        for segment in snapshot():
            if pool_id is not None and "segment_pool_id" in segment and \
                    tuple(segment["segment_pool_id"]) != tuple(pool_id):
                continue
            addresses.add(int(segment["address"]))
        return addresses

    def register_windows(self) -> list[RegisteredWindowHandle]:
        """Register every segment not yet registered as a window (flags: the pool's,
        NCCL_WIN_COLL_SYMMETRIC by default). Collective: every rank calls it after the
        same allocations. Returns the new handles."""
        from ..base.buffer import NcclBuffer
        new = []
        for address, size in self.segments():
            if address in self.windows:
                continue
            # the window's buffer holds the MemPool: its segments outlive the registration
            segment = NcclBuffer(address, size, "uint8", self.device, owner=self.mem_pool)
            handle = self.comm.register_window(segment, self.flags)
            self.windows[address] = handle
            new.append(handle)
        return new

    def window_of(self, address: int) -> RegisteredWindowHandle | None:
        """The registered window holding address, if any."""
        for start, handle in self.windows.items():
            if start <= address < start + handle.buffer.nbytes:
                return handle
        return None

    def close(self) -> None:
        """Deregister this pool's windows (collective), newest first. The MemPool itself
        goes when the last reference to it does."""
        windows, self.windows = self.windows, {}
        for handle in reversed(list(windows.values())):
            handle.close()

    def __repr__(self) -> str:
        return f"TorchSymmetricPool(device={self.device}, segments={len(self.segments())}, windows={len(self.windows)})"


def torch_pool(comm: Communicator, *, flags: int | None = None) -> TorchSymmetricPool:
    """A TorchSymmetricPool for comm; `with ncclbind.torch_pool(comm) as pool:` makes
    torch's allocations on comm's device inside the block come from ncclMemAlloc;
    pool.register_windows() then registers them as symmetric windows."""
    return TorchSymmetricPool(comm, flags=flags)
