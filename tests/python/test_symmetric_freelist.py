"""The symmetric pool's bookkeeping (ncclbind.symmetric.freelist), which SymmAllocator and
MockSymmAllocator share: first-fit allocation, merging of free neighbours, alignment,
reference counts, the eager and graph sub-pools, statistics and fragmentation. No torch,
no GPU: over a made-up base address.

Property tests (hypothesis, derandomized, bounded as in test_properties.py) run random
sequences of allocations and frees against a simple model (a byte map of the pool) and
check after every step: blocks are aligned, inside their sub-pool and disjoint; free and
used bytes add up; no two free blocks touch (they were merged); the block given is the
first free block that fits; freeing everything leaves one free block per sub-pool.
"""
from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclbind.errors import NcclInvalid
from ncclbind.symmetric.freelist import (MOCK_BASE, FreeList, MockSymmAllocator, SubPoolBookkeeping,
                                         SymmetricPoolExhausted)

MAX_EXAMPLES = 300
bounded = settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])


def refused(call, argument: str) -> NcclInvalid:
    with pytest.raises(NcclInvalid) as info:
        call()
    assert info.value.argument == argument and argument in str(info.value), str(info.value)
    return info.value


def check_invariants(free_list: FreeList) -> None:
    free = free_list.free_blocks()
    used = free_list.allocated_blocks()
    spans = sorted(free + used)
    # every byte of the range is in exactly one block, in order, nothing outside
    position = free_list.base
    for start, size in spans:
        assert start == position, (spans, free_list.base)
        assert size > 0 and size % free_list.alignment == 0 and start % free_list.alignment == 0
        position = start + size
    assert position == free_list.base + free_list.size
    # merged: no two free blocks are neighbours
    for (a, asize), (b, _) in zip(free, free[1:]):
        assert a + asize < b, free
    stats = free_list.stats()
    assert stats.free == sum(s for _, s in free) and stats.in_use == sum(s for _, s in used)
    assert stats.free + stats.in_use == free_list.size
    assert stats.largest_free == max((s for _, s in free), default=0)
    assert stats.allocations == len(used) and stats.free_blocks == len(free)
    assert 0.0 <= stats.fragmentation < 1.0


def first_fit(free_list: FreeList, nbytes: int):
    need = free_list.block_size(nbytes)
    return next((start for start, size in free_list.free_blocks() if size >= need), None)


# one step: ("alloc", nbytes) or ("free", index into the live blocks)
steps = st.lists(st.one_of(st.tuples(st.just("alloc"), st.integers(0, 40_000)),
                           st.tuples(st.just("free"), st.integers(0, 63))), max_size=60)


@bounded
@given(steps=steps, alignment=st.sampled_from([1, 16, 256, 4096]), units=st.integers(1, 64))
def test_random_sequences_keep_the_free_list_consistent(steps, alignment, units):
    size = units * 4096
    free_list = FreeList(MOCK_BASE, size, alignment)
    live = []
    for kind, value in steps:
        if kind == "alloc":
            expected = first_fit(free_list, value)
            if expected is None:
                with pytest.raises(SymmetricPoolExhausted):
                    free_list.allocate(value)
            else:
                address = free_list.allocate(value)
                assert address == expected  # first fit: the lowest free block large enough
                assert free_list.allocated_size(address) == free_list.block_size(value) >= value
                live.append(address)
        elif live:
            free_list.free(live.pop(value % len(live)))
        check_invariants(free_list)
    for address in live:
        free_list.free(address)
    check_invariants(free_list)
    assert free_list.free_blocks() == [(MOCK_BASE, size)]


@bounded
@given(sizes=st.lists(st.integers(1, 8192), min_size=1, max_size=30), order=st.randoms(use_true_random=False))
def test_freeing_in_any_order_merges_back_to_one_block(sizes, order):
    free_list = FreeList(MOCK_BASE, 1 << 20, 256)
    addresses = [free_list.allocate(n) for n in sizes]
    order.shuffle(addresses)
    for address in addresses:
        free_list.free(address)
        check_invariants(free_list)
    assert free_list.free_blocks() == [(MOCK_BASE, 1 << 20)]


def test_fragmentation_and_merge_of_a_hole_between_two_holes():
    mock = MockSymmAllocator(16 * 4096, alignment=4096)
    a, b, c, d = (mock.alloc(4096) for _ in range(4))
    assert [a, b, c, d] == [MOCK_BASE + i * 4096 for i in range(4)]
    mock.free(a)
    mock.free(c)
    s = mock.stats()
    # free: a (4096) and c (4096) and the tail (12 * 4096): three blocks
    assert (s.in_use, s.free, s.largest_free, s.eager.free_blocks) == (2 * 4096, 14 * 4096, 12 * 4096, 3)
    assert s.fragmentation == pytest.approx(1 - 12 / 14)
    mock.free(b)  # a, b, c merge into one block of three
    s = mock.stats()
    assert s.eager.free_blocks == 2 and mock.eager.free_blocks()[0] == (MOCK_BASE, 3 * 4096)
    # first fit takes the hole, not the tail
    assert mock.alloc(2 * 4096) == MOCK_BASE
    mock.free(d)
    assert mock.eager.free_blocks() == [(MOCK_BASE + 2 * 4096, 14 * 4096)]


def test_a_request_rounds_up_to_the_alignment_and_an_empty_one_gets_its_own_block():
    mock = MockSymmAllocator(8 * 4096, alignment=4096)
    a, b, c = mock.alloc(0), mock.alloc(1), mock.alloc(4097)
    assert (b - a, c - b) == (4096, 4096)
    assert mock.block_size(c) == 2 * 4096 and mock.stats().in_use == 4 * 4096


def test_exhaustion_names_what_is_free():
    mock = MockSymmAllocator(4 * 4096, alignment=4096)
    a = mock.alloc(4096)
    mock.alloc(4096)
    mock.free(a)
    with pytest.raises(SymmetricPoolExhausted) as info:
        mock.alloc(3 * 4096)
    assert isinstance(info.value, MemoryError)
    assert "12288" in str(info.value) and "largest block 8192" in str(info.value)


def test_captured_allocations_come_from_and_return_to_the_graph_sub_pool():
    mock = MockSymmAllocator(8 * 4096, alignment=4096, graph_bytes=2 * 4096)
    graph_base = MOCK_BASE + 6 * 4096
    eager = mock.alloc(4096)
    mock.capturing = True
    captured = mock.alloc(4096)
    assert eager == MOCK_BASE and captured == graph_base
    with pytest.raises(SymmetricPoolExhausted):  # the graph sub-pool has 2 units, 1 left
        mock.alloc(2 * 4096)
    mock.capturing = False
    mock.free(captured)  # back to the graph sub-pool, never to eager
    s = mock.stats()
    assert (s.graph.free, s.eager.free) == (2 * 4096, 5 * 4096)
    for _ in range(5):
        assert mock.alloc(4096) < graph_base  # eager never lands in graph memory
    with pytest.raises(SymmetricPoolExhausted):
        mock.alloc(1)


def test_reference_counts():
    mock = MockSymmAllocator(4 * 4096)
    a = mock.alloc(10)
    assert mock.refcount(a) == 1 and mock.retain(a) == 2
    assert mock.free(a) is False and mock.refcount(a) == 1  # one reference left
    assert mock.free(a) is True and mock.refcount(a) == 0
    refused(lambda: mock.free(a), "address")
    refused(lambda: mock.retain(a), "address")


def test_bad_arguments_are_refused_naming_them():
    refused(lambda: FreeList(MOCK_BASE, 4096, 3), "alignment")
    refused(lambda: FreeList(MOCK_BASE, 4096, 0), "alignment")
    refused(lambda: FreeList(MOCK_BASE + 1, 4096, 16), "base")
    refused(lambda: FreeList(MOCK_BASE, 100, 16), "size")
    refused(lambda: FreeList(MOCK_BASE, -16, 16), "size")
    refused(lambda: SubPoolBookkeeping(MOCK_BASE, 4096, 16, graph_bytes=8192), "graph_bytes")
    refused(lambda: SubPoolBookkeeping(MOCK_BASE, 4096, 16, graph_bytes=8), "graph_bytes")
    mock = MockSymmAllocator(4096)
    for bad in (-1, 1.5, True, "8", None):
        refused(lambda: mock.alloc(bad), "nbytes")
    refused(lambda: mock.free(MOCK_BASE + 16), "address")
    assert mock.stats().in_use == 0  # nothing half-done


def test_a_release_while_the_books_are_busy_is_queued_not_lost():
    """A finalizer may run while the same thread is inside the books (garbage collection
    in the middle of an allocation): the release waits until the books are free."""
    mock = MockSymmAllocator(8 * 4096)
    a = mock.alloc(1)
    with mock._lock:  # as if in the middle of another call on this thread
        assert mock.release(a) is False
        assert mock.eager.is_allocated(a)
    assert mock.stats().in_use == 0  # the next call did it
    b = mock.alloc(1)
    assert b == a


def test_threads_allocating_and_freeing_leave_consistent_books():
    mock = MockSymmAllocator(256 * 256, alignment=256)
    errors = []

    def work(seed):
        try:
            mine = []
            for i in range(400):
                if (i * 7 + seed) % 3 and len(mine) < 20:
                    try:
                        mine.append(mock.alloc(((i + seed) % 5) * 100))
                    except SymmetricPoolExhausted:
                        pass
                elif mine:
                    mock.free(mine.pop(0))
            for address in mine:
                mock.free(address)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    check_invariants(mock.eager)
    assert mock.eager.free_blocks() == [(MOCK_BASE, 256 * 256)]
