"""A randomized stress test of a communicator's lifetime under threads, over the stand-in libnccl
(fake_nccl.c), derandomized: each case's schedule comes from its seed, so a failure reruns as it
happened. Threads call the communicator through every kind of path (the C fast path, a prepared
call, the Python definition, a grouped variable-count collective, a host call) until a call raises;
one or two closers (destroy, abort, both at once) run meanwhile, at a seeded moment. Checked for
every case, the concurrency model of docs/guarantees.md's "Threads":
- no call reaches the stand-in with a freed handle, and no free happens while a call is inside
  (fakeUsedAfterFree does not move);
- the handle is freed exactly once (one ncclCommDestroy or one ncclCommAbort);
- every thread ends (none hangs) and ends with ncclbind's NcclInvalid naming comm, or an NcclError;
  never anything else.
The totals (cases, calls, time) are printed for the record (pytest -s).
"""
from __future__ import annotations

import random
import threading
import time

import pytest

from stand_ins import INSIDE, run_over_stand_in

SEEDS = range(200)
CLOSERS = (("destroy",), ("abort",), ("destroy", "abort"), ("abort", "abort"))

if not INSIDE:
    def test_concurrency_stress_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import ctypes
    import os

    import ncclbind
    from ncclbind import Communicator, UniqueId
    from ncclbind.errors import NcclError, NcclInvalid
    from stand_ins import device_array

    LIBRARY = ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"])  # the copy the runtime loaded
    TOTALS = {"cases": 0, "calls": 0, "seconds": 0.0}

    def call_paths(comm):
        a, b = device_array([1, 2]), device_array([0, 0])
        c, d = device_array([3, 4]), device_array([0, 0])
        comm.all_reduce(a, b)  # first sight: the C fast path takes the next ones
        prepared = ncclbind.prepare(comm.all_reduce, c, d)
        return [
            lambda: comm.all_reduce(a, b),
            prepared,
            lambda: type(comm).all_reduce.__wrapped__(comm, c, d),
            lambda: comm.all_gatherv(a, d, [2]),
            lambda: comm.broadcast(c, c, root=0),
            lambda: comm.finalize(),
        ]

    @pytest.mark.parametrize("seed", SEEDS)
    def test_random_interleavings_of_calls_and_closes_keep_the_model(seed):
        rng = random.Random(seed)
        LIBRARY.fakeSetCallDelay(rng.choice([0, 20, 200]))  # microseconds inside each call
        try:
            before = LIBRARY.fakeUsedAfterFree()
            comm = Communicator.init(1, 0, UniqueId.generate())
            handle = comm.handle
            paths = call_paths(comm)
            closers = rng.choice(CLOSERS)
            callers = rng.randint(2, 6)
            close_after = rng.uniform(0, 0.01)
            start = threading.Barrier(callers + len(closers) + 1)
            ended, calls = [None] * callers, [0] * callers

            def call(i):
                pick = random.Random(seed * 1000 + i)
                start.wait()
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    try:
                        pick.choice(paths)()
                        calls[i] += 1
                    except Exception as e:  # noqa: BLE001 - the test reads what it was
                        ended[i] = e
                        return
                ended[i] = "never raised"

            def close(name):
                start.wait()
                time.sleep(close_after)
                getattr(comm, name)()

            threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(callers)]
            threads += [threading.Thread(target=close, args=(name,), daemon=True) for name in closers]
            began = time.monotonic()
            for t in threads:
                t.start()
            start.wait()
            for t in threads:
                t.join(15)
            assert not any(t.is_alive() for t in threads), f"seed {seed}: a thread hangs"
            for e in ended:
                assert isinstance(e, NcclError), f"seed {seed}: {e!r}"
                if isinstance(e, NcclInvalid):
                    assert e.argument == "comm", f"seed {seed}: {e!r}"
            assert LIBRARY.fakeUsedAfterFree() == before, f"seed {seed}: a handle freed under a call"
            destroys, aborts = ctypes.c_int(), ctypes.c_int()
            LIBRARY.fakeCommCalls(ctypes.c_void_p(handle), ctypes.byref(destroys), ctypes.byref(aborts))
            assert destroys.value + aborts.value == 1, f"seed {seed}: freed {destroys.value} + {aborts.value} times"
            assert comm.closed
            TOTALS["cases"] += 1
            TOTALS["calls"] += sum(calls)
            TOTALS["seconds"] += time.monotonic() - began
        finally:
            LIBRARY.fakeSetCallDelay(0)

    def test_zz_the_totals_are_printed():
        """Runs last (pytest keeps file order): the figures for the record."""
        print(f"\nconcurrency stress: {TOTALS['cases']} cases, {TOTALS['calls']} calls, "
              f"{TOTALS['seconds']:.2f} s")
        assert TOTALS["cases"] == len(SEEDS)
