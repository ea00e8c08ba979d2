"""One rank of one backend: `python -m ncclbind.bench.worker ARGS`, started by the driver
(driver.py). The C and Rust workers (bench/cli/) take the same arguments and print the same
lines, so the driver treats every backend alike:

  --backend NAME --rank R --nranks N --device D --uid-file PATH --collectives a,b
  --sizes S1,S2 (sweep bytes) --iters I1,I2 (one per size) --warmups WMAX,WMIN --dtype NAME
  --op NAME --root R --check C --blocking 0|1 --register 0|1|2 [--host-memory]
  [--latency-rounds R]   (the latency pass: --backend names every Python backend, comma-separated)

stdout, one JSON object per line:
  {"event": "ready", "rank", "pid", "host", "device", "pci_bus", "device_name", "notes": [...]}
  {"event": "result", "collective", "size" (table bytes), "count", "in_place", "time_us",
   "wrong" (null: not checked), "iters"}          once per (collective, size, placement)
  {"event": "done"}
In the latency pass instead of "result" lines (run_latency):
  {"event": "latency", "backend", "collective", "size", "count", "in_place", "rounds" (us per call, one
   value per round), "iters" (calls per round), "batch", "fast_path" ([made, declined] of the warm-up batch's calls, or null)}
  {"event": "skipped", "backend", "collective" (null: the whole pass), "reason"}
A failure: a message on stderr and a non-zero exit.

Each size runs as nccl-tests' BenchTime does: fill (with -c), one untimed call and a sync,
a barrier, then `iters` calls timed on the host up to the stream's completion (with -z a
sync and a barrier after each call), then -c checked calls with fresh data. A fill runs on
the array library's current stream and the collective on another, so every fill is waited
for on the device before the call that reads it."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from .collectives import COLLECTIVES, expected_values, send_values, tolerance
from .config import DTYPES


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def parse_worker_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ncclbind.bench.worker")
    p.add_argument("--backend", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--nranks", type=int, required=True)
    p.add_argument("--device", type=int, required=True)
    p.add_argument("--uid-file", required=True)
    p.add_argument("--collectives", required=True)
    p.add_argument("--sizes", required=True)
    p.add_argument("--iters", required=True)
    p.add_argument("--warmups", required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--op", required=True)
    p.add_argument("--root", type=int, required=True)
    p.add_argument("--check", type=int, required=True)
    p.add_argument("--blocking", type=int, required=True)
    p.add_argument("--register", type=int, required=True)
    p.add_argument("--host-memory", action="store_true")
    p.add_argument("--latency-rounds", type=int, default=0, help="> 0: the latency pass (run_latency)")
    args = p.parse_args(argv)
    args.collectives = args.collectives.split(",")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.iters = [int(s) for s in args.iters.split(",")]
    args.warmups = [int(s) for s in args.warmups.split(",")]
    if len(args.iters) != len(args.sizes) or len(args.warmups) != 2:
        p.error("--iters: one per size; --warmups: two (at the largest and the smallest size)")
    return args


def in_place_views(ops, buf, layout, me: int):
    """The send and receive views of an in-place call in `buf`: one view, passed as both, where
    they are the same elements (all_reduce, broadcast, reduce: as a user writes comm.all_reduce(x, x)),
    else the two views nccl-tests' in-place layout gives."""
    send_at, recv_at = layout.send_in_place * me, layout.recv_in_place * me
    recv = ops.view(buf, recv_at, layout.recv)
    return (recv if (send_at, layout.send) == (recv_at, layout.recv) else ops.view(buf, send_at, layout.send)), recv


def run_collective(backend, args, name: str) -> None:
    collective = COLLECTIVES[name]
    size, n, me, ops = DTYPES[args.dtype][1], args.nranks, args.rank, backend.ops
    layouts = [collective.layout(b, size, n) for b in args.sizes]
    biggest = max(layouts, key=lambda lay: lay.buffer)
    sendbuf, recvbuf = backend.alloc(biggest.send), backend.alloc(biggest.buffer)
    tol = tolerance(args.dtype, args.op)

    def views(layout, in_place):
        if in_place:
            return in_place_views(ops, recvbuf, layout, me)
        if name in backend.in_place_only:
            view = ops.view(sendbuf, 0, layout.send)
            return view, view
        return ops.view(sendbuf, 0, layout.send), ops.view(recvbuf, 0, layout.recv)

    def fill(layout, in_place, rep):
        send, recv = views(layout, in_place)
        ops.poison(recvbuf)
        if not in_place and name not in backend.in_place_only:
            ops.poison(sendbuf)
        ops.store(send, send_values(ops.arange, name, layout, me, n, rep, args.op))
        ops.finish()  # the collective runs on another stream: it must find the data written

    # nccl-tests warms up once per test at the largest and the smallest size, out of place.
    for layout, count in ((layouts[-1], args.warmups[0]), (layouts[0], args.warmups[1])):
        if layout.count:
            call = backend.prepare(name, *views(layout, False), layout, False, args.root)
            for _ in range(count):
                call()
    backend.sync()

    for layout, iters in zip(layouts, args.iters):
        if layout.count == 0:
            continue
        for in_place in (False, True):
            send, recv = views(layout, in_place)
            call = backend.prepare(name, send, recv, layout, in_place, args.root)
            if args.check:
                fill(layout, in_place, 0)
            call()
            backend.sync()
            backend.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
                if args.blocking:
                    backend.sync()
                    backend.barrier()
            backend.sync()
            time_us = (time.perf_counter() - t0) / iters * 1e6
            wrong = None
            if args.check and (not in_place or collective.in_place_checked):
                wrong = 0
                for rep in range(1, args.check + 1):
                    fill(layout, in_place, rep)
                    call()
                    backend.sync()
                    want = expected_values(ops.arange, name, layout, me, n, rep, args.op, args.root)
                    if want is not None:
                        wrong += ops.count_wrong(recv, want, tol)
                    if wrong:
                        break
            emit({"event": "result", "collective": name, "size": collective.table_bytes(layout, size),
                  "count": layout.count, "in_place": int(in_place), "time_us": time_us, "wrong": wrong,
                  "iters": iters, "ran_in_place": int(not in_place and name in backend.in_place_only)})


def latency_batches(iters: int) -> tuple[int, int]:
    """(batches, calls per batch) for `iters` calls in a round: ten batches from ten calls up,
    each long enough that its one synchronize is a small part of it."""
    per = max(1, iters // 10)
    return max(1, iters // per), per


def run_latency(backends: dict, args, name: str) -> None:
    """The latency pass of one collective: every backend of `backends` (one process, one
    communicator each) at every size of args.sizes, in args.latency_rounds rounds. In a round
    each backend in turn (the order rotated by one each round, so that none always follows the
    same one) waits on its own barrier, then makes args.iters calls in batches, each batch timed
    from its first launch to its stream's completion; the round's value is the median batch's
    time per call. Every backend gets the same buffers, the same layout and the same schedule.
    The placement is the same for all: in place when some backend has no out-of-place form of
    the collective (torch.distributed's all_reduce, broadcast, reduce), else out of place."""
    from .python_backends import Unsupported
    collective = COLLECTIVES[name]
    size, n, me = DTYPES[args.dtype][1], args.nranks, args.rank
    steps = [(lay, it) for lay, it in zip((collective.layout(b, size, n) for b in args.sizes), args.iters) if lay.count]
    if not steps or not backends:
        return
    in_place = any(name in b.in_place_only for b in backends.values())
    biggest = max((lay for lay, _ in steps), key=lambda lay: lay.buffer)
    buffers = {}
    for key, backend in backends.items():
        send, recv = backend.alloc(biggest.send), backend.alloc(biggest.buffer)
        backend.ops.poison(send)
        backend.ops.poison(recv)
        backend.ops.finish()
        buffers[key] = (send, recv)

    def views(key, layout):
        ops, (send, recv) = backends[key].ops, buffers[key]
        if in_place:
            return in_place_views(ops, recv, layout, me)
        return ops.view(send, 0, layout.send), ops.view(recv, 0, layout.recv)

    skipped = set()
    for layout, iters in steps:
        nbatches, per = latency_batches(iters)
        calls = {}
        for key, backend in backends.items():
            if key in skipped:
                continue
            try:
                calls[key] = backend.prepare(name, *views(key, layout), layout, in_place, args.root)
            except Unsupported as e:  # the same on every rank: a call this backend lacks
                skipped.add(key)
                emit({"event": "skipped", "backend": key, "collective": name, "reason": str(e)})
        order = list(calls)
        counts = {}
        for key in order:  # warm-up: one batch each, its calls' paths observed (untimed)
            def warm_up(key=key):
                for _ in range(per):
                    calls[key]()
                backends[key].sync()
            paths = backends[key].paths_of(warm_up)
            counts[key] = None if paths is None else list(paths)
        rounds = {key: [] for key in order}
        for r in range(args.latency_rounds):
            for key in order[r % len(order):] + order[:r % len(order)]:
                backend, call = backends[key], calls[key]
                backend.barrier()
                batches = []
                for _ in range(nbatches):
                    t0 = time.perf_counter()
                    for _ in range(per):
                        call()
                    backend.sync()
                    batches.append((time.perf_counter() - t0) / per * 1e6)
                rounds[key].append(statistics.median(batches))
        for key in order:
            emit({"event": "latency", "backend": key, "collective": name,
                  "size": collective.table_bytes(layout, size), "count": layout.count, "in_place": int(in_place),
                  "rounds": rounds[key], "iters": nbatches * per, "batch": per, "fast_path": counts[key]})


def latency_main(args) -> int:
    """The latency pass: every backend of --backend made in this process (one that cannot run
    here, Unsupported or a module it cannot import, is reported as skipped: the same on every
    rank, before it joins a communicator), then run_latency per collective."""
    from .python_backends import BACKENDS, Unsupported
    names = [b for b in args.backend.split(",") if b]
    unknown = [b for b in names if b not in BACKENDS]
    if unknown:
        print(f"ncclbind.bench.worker: --backend {','.join(unknown)}: not a Python backend ({', '.join(BACKENDS)})",
              file=sys.stderr)
        return 2
    backends, notes = {}, []
    try:
        for name in names:
            try:
                backends[name] = BACKENDS[name](args.rank, args.nranks, args.device, f"{args.uid_file}.{name}",
                                                args.dtype, args.op, args.register, args.host_memory)
            except (Unsupported, ImportError) as e:  # the same on every rank (one machine, one environment)
                emit({"event": "skipped", "backend": name, "collective": None, "reason": f"{type(e).__name__}: {e}"})
                continue
            notes += [f"{name}: {note}" for note in backends[name].notes]
        if not backends:
            emit({"event": "unsupported", "reason": "no Python backend could run here"})
            return 0
        first = next(iter(backends.values()))
        emit({"event": "ready", "rank": args.rank, **first.device_info(), "notes": notes})
        for name in args.collectives:
            run_latency(backends, args, name)
    finally:
        for backend in reversed(list(backends.values())):
            backend.close()
    emit({"event": "done"})
    return 0


def main(argv=None) -> int:
    args = parse_worker_args(argv)
    if args.latency_rounds > 0:
        return latency_main(args)
    from .python_backends import BACKENDS, Unsupported
    if args.backend not in BACKENDS:
        print(f"ncclbind.bench.worker: --backend {args.backend!r} is not a Python backend "
              f"({', '.join(BACKENDS)})", file=sys.stderr)
        return 2
    try:
        backend = BACKENDS[args.backend](args.rank, args.nranks, args.device, args.uid_file, args.dtype, args.op,
                                         args.register, args.host_memory)
    except Unsupported as e:
        emit({"event": "unsupported", "reason": str(e)})
        return 0
    emit({"event": "ready", "rank": args.rank, **backend.device_info(), "notes": list(backend.notes)})
    try:
        for name in args.collectives:
            run_collective(backend, args, name)
    except Unsupported as e:  # found while preparing a call: the same for every rank
        emit({"event": "unsupported", "reason": str(e)})
        return 0
    finally:
        backend.close()
    emit({"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
