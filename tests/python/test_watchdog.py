"""The hang watchdog over the stand-in libnccl: a call that never completes
(fakeHangNextAllReduce makes the next ncclAllReduce block until its communicator
is aborted) ends with NcclTimeout naming the call, and the communicator aborted."""
from __future__ import annotations

import threading
import time

import pytest

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_watchdog_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import ctypes
    import os

    from ncclbind import Communicator, UniqueId
    from ncclbind.base.watchdog import watched
    from ncclbind.errors import NcclInvalid, NcclTimeout
    from stand_ins import device_array

    def hang_next_all_reduce():
        ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"]).fakeHangNextAllReduce()

    def test_a_call_that_never_completes_raises_ncclTimeout_naming_it():
        comm = Communicator.init(1, 0, UniqueId.generate())
        x = device_array([1, 2])
        hang_next_all_reduce()
        started = time.monotonic()
        with pytest.raises(NcclTimeout) as info:
            with comm.watchdog(0.2, poll_s=0.02):
                with watched(comm, "all_reduce", 0):
                    comm.all_reduce(x, x)
        assert 0.2 <= time.monotonic() - started < 5
        assert info.value.function == "all_reduce" and info.value.timeout_s == 0.2
        assert "all_reduce did not complete within 0.2 s" in str(info.value)
        assert isinstance(info.value, TimeoutError)
        assert comm.closed  # aborted by the watchdog

    def test_leaving_the_block_keeps_watching_a_wait_another_thread_began_under_it():
        """The block's owner leaves while another thread is blocked in a call it began under
        the watchdog: leaving waits until that wait ends, which the watchdog ends by its
        timeout (NcclTimeout in that thread, the communicator aborted), never stranding it."""
        comm = Communicator.init(1, 0, UniqueId.generate())
        x = device_array([1, 2])
        hang_next_all_reduce()
        raised = []

        def other():
            try:
                comm.all_reduce(x, x)  # watched: a watchdog is active on comm
            except Exception as e:  # noqa: BLE001 - the test reads what it was
                raised.append(e)

        thread = threading.Thread(target=other, daemon=True)
        try:
            with comm.watchdog(0.3, poll_s=0.02):
                thread.start()
                time.sleep(0.1)  # the other thread is blocked in the hung all_reduce
            thread.join(5)
            assert not thread.is_alive(), "leaving the block stranded the other thread's wait"
            assert len(raised) == 1 and isinstance(raised[0], NcclTimeout), raised
            assert raised[0].function == "all_reduce" and comm.closed
        finally:
            comm.abort()  # ends the hung call if the watchdog did not

    def test_work_that_completes_in_time_passes_and_the_communicator_stays():
        comm = Communicator.init(1, 0, UniqueId.generate())
        send, recv = device_array([1, 2]), device_array([0, 0])
        with comm.watchdog(5, poll_s=0.01) as dog:
            comm.all_gatherv(send, recv, [2])
            time.sleep(0.05)  # idle time under the watchdog is not a wait
            dog.synchronize()
        assert recv.array.tolist() == [1, 2] and not comm.closed
        comm.destroy()

    def test_idle_time_does_not_count():
        comm = Communicator.init(1, 0, UniqueId.generate())
        with comm.watchdog(0.05, poll_s=0.01):
            time.sleep(0.2)
        assert not comm.closed
        comm.destroy()

    @pytest.mark.parametrize("timeout", [0, -1, True, "5", float("inf"), float("nan")])
    def test_bad_timeouts_name_the_argument(timeout):
        comm = Communicator.init(1, 0, UniqueId.generate())
        with pytest.raises(NcclInvalid) as info:
            comm.watchdog(timeout)
        assert info.value.argument == "timeout_s"
        comm.destroy()

    @pytest.mark.parametrize("poll", [float("inf"), float("nan"), 0, -0.1, 1e-9, 2.0, True, "0.1"])
    def test_a_poll_that_never_looks_or_only_spins_is_refused(poll):
        comm = Communicator.init(1, 0, UniqueId.generate())
        with pytest.raises(NcclInvalid) as info:
            comm.watchdog(1.0, poll_s=poll)  # inf never fires, 0 spins a core, 2 s misses a 1 s timeout
        assert info.value.argument == "poll_s"
        comm.destroy()

    def test_one_watchdog_at_a_time():
        comm = Communicator.init(1, 0, UniqueId.generate())
        with comm.watchdog(5):
            with pytest.raises(NcclInvalid, match="already has an active watchdog"):
                with comm.watchdog(5):
                    pass
        comm.destroy()
