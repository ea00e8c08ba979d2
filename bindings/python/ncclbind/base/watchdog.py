"""An opt-in hang watchdog per communicator.

    with comm.watchdog(timeout_s=60) as dog:
        comm.all_to_allv(...)          # a call that blocks past 60 s: NcclTimeout
        dog.synchronize(stream)        # work that does not finish within 60 s: NcclTimeout

While a thread waits under the watchdog (inside a watched NCCL call, or in
Watchdog.synchronize), a background thread measures the wait; when it passes
timeout_s the watchdog aborts the communicator (ncclCommAbort, which makes the
blocked NCCL call or the stream's NCCL kernels return), and the waiting thread
raises NcclTimeout naming the call that did not complete. The deadline runs
while someone waits, not from when work was enqueued: without CUDA events the
host cannot tell finished work from work not yet waited for, and a deadline on
unwatched time would abort healthy communicators. After a timeout the
communicator is aborted (closed); nothing else is retried.

Calls are watched through `watched(comm, call, stream)`, which every
collective wraps around its NCCL calls; it costs a dictionary lookup when the
communicator has no watchdog.
"""
from __future__ import annotations

import math
import threading
import time
import weakref

from .. import _nccl
from ..errors import NcclError, NcclInvalid, NcclTimeout

# Communicator -> its active Watchdog (the Communicator's __slots__ hold no place for it).
_active: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Wait:
    """One thread's wait under the watchdog: the call it waits for and since when."""

    __slots__ = ("call", "since")

    def __init__(self, call: str):
        self.call, self.since = call, time.monotonic()


_MIN_POLL_S = 1e-4  # the shortest poll: below it the watchdog thread only spins


class Watchdog:
    """A communicator's watchdog; make it with Communicator.watchdog(timeout_s)
    and use it as a context manager (one at a time per communicator)."""

    def __init__(self, comm, timeout_s: float, *, poll_s: float | None = None):
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < math.inf:
            raise NcclInvalid(f"timeout_s must be a positive, finite number of seconds, not {timeout_s!r}",
                              "timeout_s")
        if poll_s is not None and (isinstance(poll_s, bool) or not isinstance(poll_s, (int, float))
                                   or not _MIN_POLL_S <= poll_s <= timeout_s):
            # infinity would never look, 0 would spin a core, a poll longer than the timeout misses it
            raise NcclInvalid(f"poll_s must be between {_MIN_POLL_S} s and timeout_s ({timeout_s} s), not {poll_s!r}",
                              "poll_s")
        self.comm = comm
        self.timeout_s = float(timeout_s)
        self.poll_s = min(self.timeout_s / 4, 0.5) if poll_s is None else float(poll_s)
        self.expired: _Wait | None = None  # the wait that ran out (the communicator is aborted)
        self._waits: set = set()
        self._lock = threading.Lock()
        self._left = threading.Condition(self._lock)  # a wait ended (leaving the block waits for all)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._streams: dict = {}  # stream handle -> the first call enqueued on it since the last synchronize

    # ---- lifetime ---------------------------------------------------------

    def __enter__(self) -> Watchdog:
        self.comm._live()
        if _active.get(self.comm) is not None:
            raise NcclInvalid("comm already has an active watchdog", "comm")
        _active[self.comm] = self
        _nccl._set_watched_communicators(len(_active))  # the C fast path gives their calls to Python
        self._thread = threading.Thread(target=self._watch, name=f"ncclbind watchdog {self.comm!r}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None and self.expired is None and not self.comm.closed:
                self.synchronize()
        finally:
            # Another thread may still wait under this watchdog (a call it began inside the
            # block): the watchdog keeps timing it until it ends (past timeout_s it aborts the
            # communicator, which ends it), so that leaving never strands a thread unwatched.
            with self._left:
                while self._waits:
                    self._left.wait()
            self._stop.set()
            self._thread.join()
            _active.pop(self.comm, None)
            _nccl._set_watched_communicators(len(_active))

    # ---- waiting ---------------------------------------------------------

    def guard(self, call: str) -> _Guard:
        """A context manager for a wait named `call`: past timeout_s, the
        communicator is aborted and the block raises NcclTimeout."""
        return _Guard(self, call)

    def enqueued(self, call: str, stream: int) -> None:
        """Note that `call` enqueued work on `stream` (synchronize waits for it)."""
        self._streams.setdefault(stream, call)

    def synchronize(self, stream: int | None = None) -> None:
        """Wait for the work enqueued under the watchdog (on `stream`, or on every
        stream used); NcclTimeout, naming the first call enqueued there since the
        last synchronize, when it does not finish within timeout_s."""
        from .cuda import device_count, stream_synchronize
        streams = list(self._streams) if stream is None else [stream]
        if streams and not device_count():
            self._streams.clear()  # no CUDA device: the stand-in library ran the work in the call
            return
        for s in streams:
            with self.guard(self._streams.get(s, "synchronize")):
                stream_synchronize(s)
            self._streams.pop(s, None)

    def _raise_if_expired(self, cause: BaseException | None = None) -> None:
        expired = self.expired
        if expired is not None:
            raise NcclTimeout(f"{expired.call} did not complete within {self.timeout_s:g} s; the watchdog aborted "
                              "the communicator", function=expired.call, timeout_s=self.timeout_s) from cause

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            now = time.monotonic()
            with self._lock:
                late = next((w for w in self._waits if now - w.since > self.timeout_s), None)
                if late is None:
                    continue
                self.expired = late
            self.comm.abort()  # the blocked call returns (with an error), and _Guard raises NcclTimeout
            return

    def __repr__(self) -> str:
        state = f", expired in {self.expired.call}" if self.expired else ""
        return f"Watchdog({self.comm!r}, timeout_s={self.timeout_s:g}{state})"


class _Guard:
    __slots__ = ("dog", "wait")

    def __init__(self, dog: Watchdog, call: str):
        self.dog, self.wait = dog, _Wait(call)

    def __enter__(self) -> None:
        self.dog._raise_if_expired()
        with self.dog._lock:
            self.dog._waits.add(self.wait)

    def __exit__(self, exc_type, exc, tb) -> None:
        with self.dog._left:
            self.dog._waits.discard(self.wait)
            self.dog._left.notify_all()
        if exc is None or isinstance(exc, NcclError):
            self.dog._raise_if_expired(exc)


class _NotWatched:
    """watched()'s answer for a communicator without a watchdog: nothing to do."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> None:
        return None


_NOT_WATCHED = _NotWatched()


def watched(comm, call: str, stream: int):
    """The context manager a collective wraps around its NCCL calls: guarded by
    comm's watchdog when it has one (and noted as work on `stream`), else nothing."""
    dog = _active.get(comm)
    if dog is None:
        return _NOT_WATCHED
    dog.enqueued(call, stream)
    return dog.guard(call)


class WatchdogSupport:
    """Communicator.watchdog (a mixin of Communicator)."""

    __slots__ = ()

    def watchdog(self, timeout_s: float, *, poll_s: float | None = None) -> Watchdog:
        """A hang watchdog for this communicator, as a context manager: a wait under
        it (a watched call, Watchdog.synchronize) longer than timeout_s aborts the
        communicator and raises NcclTimeout naming the call. poll_s: how often it
        looks (default: timeout_s / 4, at most 0.5 s)."""
        return Watchdog(self, timeout_s, poll_s=poll_s)
