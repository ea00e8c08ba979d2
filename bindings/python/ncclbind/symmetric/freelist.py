"""The bookkeeping of a symmetric pool, in plain Python (no torch, no CUDA): which byte
ranges of the pool are in use, first-fit allocation, merging of free neighbours,
reference counts, and the two sub-pools (eager, and CUDA-graph captured).

SymmAllocator (ncclbind.symmetric.allocator) keeps its pool's books with
SubPoolBookkeeping; MockSymmAllocator is the same bookkeeping over a made-up base
address, for tests and for reasoning about fragmentation without a GPU.

Why two sub-pools: memory handed out while a CUDA graph is being captured is used again
each time the graph is replayed, long after the capture "freed" it. Were it returned to
the memory eager code allocates from, an eager tensor could land on it and be
overwritten by a replay. So captured allocations come from, and return to, their own
range of the pool (all captures share it, as graphs that share a torch memory pool do:
replay graphs in the order they were captured).

Addresses are byte addresses; every block starts at a multiple of `alignment` from the
pool's base (and the base itself is aligned), so a block's offset into the pool is the
same on every rank that makes the same calls: NCCL's symmetric kernels need a buffer at
the same offset of the window on every rank.
"""
from __future__ import annotations

import bisect
import collections
import threading
from dataclasses import dataclass, field

from ..errors import NcclInvalid

# A fake base for MockSymmAllocator: a plausible, well-aligned device address.
MOCK_BASE = 0x7F00_0000_0000


class SymmetricPoolExhausted(MemoryError):
    """No free block of the sub-pool is large enough for the request."""


def _check_count(value, argument: str, *, positive: bool = False) -> int:
    if type(value) is bool or not isinstance(value, int) or value < (1 if positive else 0):
        raise NcclInvalid(f"{argument} must be an int {'> 0' if positive else '>= 0'}, not {value!r}", argument)
    return value


def round_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


@dataclass(frozen=True)
class FreeListStats:
    """One free list: bytes in use and free, its largest free block, and the
    fragmentation 1 - largest_free / free (0 when nothing or one block is free)."""

    size: int
    in_use: int
    free: int
    largest_free: int
    allocations: int
    free_blocks: int

    @property
    def fragmentation(self) -> float:
        return 0.0 if self.free == 0 else 1.0 - self.largest_free / self.free


class FreeList:
    """First-fit allocation of aligned blocks from [base, base + size).

    Free blocks are kept sorted by address; freeing a block merges it with the free
    blocks right before and after it, so two neighbouring free blocks never exist.
    Every block's size is a multiple of `alignment` (requests are rounded up; an empty
    request takes one alignment unit, so that it too has an address of its own).
    Not thread-safe: SubPoolBookkeeping locks around it."""

    def __init__(self, base: int, size: int, alignment: int):
        _check_count(base, "base")
        _check_count(size, "size")
        _check_count(alignment, "alignment", positive=True)
        if alignment & (alignment - 1):
            raise NcclInvalid(f"alignment must be a power of two, not {alignment}", "alignment")
        if base % alignment:
            raise NcclInvalid(f"base {base:#x} is not a multiple of the alignment {alignment}", "base")
        if size % alignment:
            raise NcclInvalid(f"size {size} is not a multiple of the alignment {alignment}", "size")
        self.base, self.size, self.alignment = base, size, alignment
        self._starts: list[int] = [base] if size else []  # free blocks: starts, sorted
        self._ends: dict[int, int] = {base: base + size} if size else {}  # free block start -> end
        self._used: dict[int, int] = {}  # allocated block start -> its (rounded) size

    def block_size(self, nbytes: int) -> int:
        """What a request of nbytes takes from the list."""
        return round_up(max(nbytes, 1), self.alignment)

    def allocate(self, nbytes: int) -> int:
        """The address of a new block of at least nbytes: the first free block that fits."""
        _check_count(nbytes, "nbytes")
        need = self.block_size(nbytes)
        for index, start in enumerate(self._starts):
            end = self._ends[start]
            if end - start >= need:
                del self._ends[start]
                if end - start == need:
                    del self._starts[index]
                else:
                    self._starts[index] = start + need
                    self._ends[start + need] = end
                self._used[start] = need
                return start
        stats = self.stats()
        raise SymmetricPoolExhausted(
            f"no free block of {need} bytes (asked {nbytes}) in the symmetric pool range "
            f"[{self.base:#x}, {self.base + self.size:#x}): {stats.free} bytes free, the largest block "
            f"{stats.largest_free} bytes, {stats.free_blocks} free blocks")

    def free(self, address: int) -> int:
        """Return a block; it merges with free neighbours. Returns the block's size."""
        size = self._used.pop(address, None)
        if size is None:
            raise NcclInvalid(f"address {address!r} is not an allocated block of this pool", "address")
        start, end = address, address + size
        index = bisect.bisect_left(self._starts, start)
        if index < len(self._starts) and self._starts[index] == end:  # the next free block
            end = self._ends.pop(end)
            del self._starts[index]
        if index > 0 and self._ends[self._starts[index - 1]] == start:  # the previous free block
            self._ends[self._starts[index - 1]] = end
        else:
            self._starts.insert(index, start)
            self._ends[start] = end
        return size

    def contains(self, address: int) -> bool:
        return self.base <= address < self.base + self.size

    def is_allocated(self, address: int) -> bool:
        return address in self._used

    def allocated_size(self, address: int) -> int | None:
        """The size of the allocated block at address, None if there is none."""
        return self._used.get(address)

    def free_blocks(self) -> list[tuple[int, int]]:
        """The free blocks as (address, size), by address."""
        return [(s, self._ends[s] - s) for s in self._starts]

    def allocated_blocks(self) -> list[tuple[int, int]]:
        """The allocated blocks as (address, size), by address."""
        return sorted(self._used.items())

    def stats(self) -> FreeListStats:
        sizes = [self._ends[s] - s for s in self._starts]
        free = sum(sizes)
        return FreeListStats(size=self.size, in_use=self.size - free, free=free,
                             largest_free=max(sizes, default=0), allocations=len(self._used),
                             free_blocks=len(sizes))


@dataclass(frozen=True)
class SymmStats:
    """A pool's statistics: both sub-pools together, and each (`eager`, `graph`)."""

    eager: FreeListStats
    graph: FreeListStats
    in_use: int = field(init=False)
    free: int = field(init=False)
    largest_free: int = field(init=False)
    allocations: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "in_use", self.eager.in_use + self.graph.in_use)
        object.__setattr__(self, "free", self.eager.free + self.graph.free)
        object.__setattr__(self, "largest_free", max(self.eager.largest_free, self.graph.largest_free))
        object.__setattr__(self, "allocations", self.eager.allocations + self.graph.allocations)

    @property
    def fragmentation(self) -> float:
        """1 - largest free block / free bytes, over the eager sub-pool (where fragmentation
        costs: graph memory is planned once at capture)."""
        return self.eager.fragmentation

    def as_dict(self) -> dict:
        return {"in_use": self.in_use, "free": self.free, "largest_free": self.largest_free,
                "fragmentation": self.fragmentation, "allocations": self.allocations,
                "eager": dict(self.eager.__dict__, fragmentation=self.eager.fragmentation),
                "graph": dict(self.graph.__dict__, fragmentation=self.graph.fragmentation)}


class SubPoolBookkeeping:
    """The books of one pool of `size` bytes at `base`: the eager sub-pool is its first
    size - graph_bytes bytes, the graph sub-pool the rest; each block is reference
    counted (allocate gives one reference; retain adds one; release drops one and frees
    the block at zero).

    Thread-safe. release() may run from a finalizer at any moment (garbage collection in
    the middle of another call, on any thread): when the books are busy, the release is
    queued and done by whoever holds them before they let go, or by the next call."""

    def __init__(self, base: int, size: int, alignment: int, graph_bytes: int = 0):
        _check_count(graph_bytes, "graph_bytes")
        _check_count(alignment, "alignment", positive=True)
        if graph_bytes % alignment:
            raise NcclInvalid(f"graph_bytes {graph_bytes} is not a multiple of the alignment {alignment}",
                              "graph_bytes")
        if graph_bytes > size:
            raise NcclInvalid(f"graph_bytes {graph_bytes} is larger than the pool ({size} bytes)", "graph_bytes")
        self.base, self.size, self.alignment, self.graph_bytes = base, size, alignment, graph_bytes
        self.eager = FreeList(base, size - graph_bytes, alignment)
        self.graph = FreeList(base + size - graph_bytes, graph_bytes, alignment)
        self._refs: dict[int, int] = {}
        self._lock = threading.Lock()
        self._pending: collections.deque = collections.deque()

    def _list_of(self, address: int) -> FreeList:
        return self.graph if self.graph.is_allocated(address) else self.eager

    def _drain(self) -> None:
        pending = self._pending
        while pending:
            self._release_locked(pending.popleft())

    def _release_locked(self, address: int) -> bool:
        refs = self._refs.get(address)
        if refs is None:
            raise NcclInvalid(f"address {address!r} is not an allocated block of this pool", "address")
        if refs > 1:
            self._refs[address] = refs - 1
            return False
        del self._refs[address]
        self._list_of(address).free(address)
        return True

    def _locked(self, function, *args):
        with self._lock:
            try:
                self._drain()
                return function(*args)
            finally:
                self._drain()

    def allocate(self, nbytes: int, captured: bool = False) -> int:
        """A new block of at least nbytes (from the graph sub-pool when captured), with one reference."""
        def allocate():
            address = (self.graph if captured else self.eager).allocate(nbytes)
            self._refs[address] = 1
            return address
        return self._locked(allocate)

    def retain(self, address: int) -> int:
        """One more reference to an allocated block; the new count."""
        def retain():
            if address not in self._refs:
                raise NcclInvalid(f"address {address!r} is not an allocated block of this pool", "address")
            self._refs[address] += 1
            return self._refs[address]
        return self._locked(retain)

    def release(self, address: int) -> bool:
        """Drop one reference; True when that freed the block. From a finalizer while the
        books are busy, it is queued (done before the busy call returns) and gives False."""
        if not self._lock.acquire(blocking=False):
            self._pending.append(address)
            return False
        try:
            self._drain()
            return self._release_locked(address)
        finally:
            try:
                self._drain()
            finally:
                self._lock.release()

    def refcount(self, address: int) -> int:
        """References to a block (0: not allocated)."""
        return self._locked(lambda: self._refs.get(address, 0))

    def offset(self, address: int) -> int:
        """The block's byte offset from the pool's base (equal on every rank that made the same calls)."""
        return address - self.base

    def block_size(self, address: int) -> int:
        def size():
            nbytes = self._list_of(address).allocated_size(address)
            if nbytes is not None:
                return nbytes
            raise NcclInvalid(f"address {address!r} is not an allocated block of this pool", "address")
        return self._locked(size)

    def stats(self) -> SymmStats:
        return self._locked(lambda: SymmStats(self.eager.stats(), self.graph.stats()))


class MockSymmAllocator(SubPoolBookkeeping):
    """The allocator's bookkeeping over a made-up base address, without torch or a GPU:
    alloc / free as the real allocator makes them, `capturing` standing in for
    torch.cuda.is_current_stream_capturing().

        mock = MockSymmAllocator(1 << 20, alignment=4096)
        a = mock.alloc(100); b = mock.alloc(5000)
        mock.free(a); mock.stats().fragmentation"""

    def __init__(self, size: int, *, alignment: int = 4096, graph_bytes: int = 0, base: int = MOCK_BASE):
        super().__init__(base, size, alignment, graph_bytes)
        self.capturing = False

    def alloc(self, nbytes: int) -> int:
        return self.allocate(nbytes, captured=self.capturing)

    def free(self, address: int) -> bool:
        return self.release(address)
