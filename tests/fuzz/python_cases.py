"""The fuzz classes that run inside one Python process over the stand-in libraries: each class
makes seeded cases from one random.Random, and each case is a call that either must succeed (a
valid call) or must be refused with ncclbind's named error before NCCL is called (a bad one).

A case is Case(what, bad, call): `what` is a short description for reports, `bad` says which
argument was made bad (None for a valid call), `call()` makes the call. child.py runs the cases
and sorts each outcome (outcomes.py). The calls use only API that ncclbind had before issue 24
too, so one case list runs against an older checkout for the before/after table
(bench/fuzz_table.py).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

import numpy as np

import ncclbind
from stand_ins import DeviceArray, DLPackArray


@dataclass
class Case:
    what: str
    bad: str | None          # the argument made bad, or None: a valid call that must succeed
    call: Callable[[], object]
    either: bool = False     # a valid input that may also be refused by name (a lookup of any key)
    judge: Callable[[AssertionError], str] | None = None  # the outcome of a check the call asserts


class Garbage:
    """Not a buffer, stream, op, count or config of any kind."""

    def __repr__(self):
        return "Garbage()"


N = 4  # elements of every valid buffer (one rank: send and receive sizes agree)
DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
          "uint8": np.uint8, "float16": np.float16}


def device(n: int = N, dtype: str = "float32") -> DeviceArray:
    return DeviceArray(np.arange(n).astype(DTYPES[dtype]))


class CAI:
    """A __cuda_array_interface__ exactly as given (malformed ones included)."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface

    def __repr__(self):
        return f"CAI({self.__cuda_array_interface__!r})"


class Producer:
    """A DLPack producer whose __dlpack_device__ is `device` and whose capsule is `array`'s."""

    def __init__(self, array: DLPackArray, device):
        self.array, self.device = array, device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        return self.array.__dlpack__()

    def __repr__(self):
        return f"Producer(device={self.device!r})"


def made_bad(rng: random.Random, arguments: list[str]) -> str | None:
    """The one argument a case makes bad (most cases), or None: a valid call."""
    return rng.choice(arguments) if rng.random() < 0.85 else None


def bad_buffers(rng: random.Random) -> list:
    """Buffers NCCL must never see: malformed CUDA array interfaces and DLPack exports, extents
    that are negative or overflow, devices that disagree, and things that are no buffer."""
    host = np.arange(N, dtype=np.float32)
    address = host.ctypes.data
    big = rng.choice([2 ** 62, 2 ** 63, 2 ** 64 - 1, 2 ** rng.randrange(62, 70)])  # bytes past 2**63: overflow
    interface = {"shape": (N,), "typestr": "<f4", "data": (address, False), "version": 3}
    required = rng.choice(["shape", "typestr", "data"])  # ("version" and "strides" are not read)
    mutated = [dict(interface, shape=(-2, -2)), dict(interface, shape=(big,)), dict(interface, shape=("4",)),
               dict(interface, shape=None), dict(interface, shape=(2.5,)), dict(interface, typestr="<f3"),
               dict(interface, typestr="x"), dict(interface, typestr=4), dict(interface, typestr="\ud800"),
               dict(interface, data=(0, False)), dict(interface, data="abc"), dict(interface, data=(address,)),
               dict(interface, data=(2 ** 64 - 8, False)), dict(interface, data=(-address, False)),
               dict(interface, strides=(4, 4)), dict(interface, strides="x"),
               {k: v for k, v in interface.items() if k != required},
               dict(interface, shape=(N,), strides=(-4,)), "not a dict", [1, 2], None]
    capsules = [DLPackArray(host, device=0, capsule_device=(1, 0)),   # the capsule says CPU
                DLPackArray(host, device=0, capsule_device=(2, 5)),   # the capsule says another GPU
                Producer(DLPackArray(host), (2, 7)),                  # the producer says another GPU
                Producer(DLPackArray(host), ("2", 0)),
                Producer(DLPackArray(host), None),
                DLPackArray(np.zeros(N, dtype=bool))]
    specs = [(address, -1, "float32"), (address, big, "float32"), (address, N, "floaty"),
             (address, N, "\ud800"), (address, N, 99), (address, N, -1), (address, N, "float32", 7), (address, N, "float32", "x"),
             (2 ** 64 - 4, N, "float32"), (address, 1.5, "float32"), (address, True, "float32"), (address,)]
    junk = ["x", 3, 1.5, True, b"\0" * 16, (1, 2), Garbage(), {"ptr": address}]
    pool = [CAI(i) for i in mutated] + capsules + specs + junk
    return [rng.choice(pool), host]  # host keeps the memory the interfaces point at alive


BAD_STREAMS = ["0", "default", 1.5, -1, 2 ** 64, True, False, Garbage(), b"\0", math.nan]
BAD_OPS = [63, 5, -1, 2 ** 40, "median", "", "\ud800", 1.5, True, None, Garbage(), "SUM\0"]
BAD_ROOTS = [-1, 1, 2 ** 31, -2 ** 31 - 1, "0", 1.0, True, Garbage(), np.float32(0), [0]]
GOOD_ROOTS = [0, np.int64(0), np.int32(0), np.uint8(0)]
GOOD_OPS = ["sum", "max", "min", "prod", ncclbind.NcclRedOp.SUM, 0]
GOOD_STREAMS = [None, 0]


def collective_call(rng: random.Random, comm):
    """(method name, positional args, keyword args, the argument made bad or None, kept alive)."""
    name = rng.choice(["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "send", "recv"])
    dtype = rng.choice(list(DTYPES))
    send, recv = device(N, dtype), device(N, dtype)
    values = {"sendbuf": send, "recvbuf": recv, "op": rng.choice(GOOD_OPS), "root": rng.choice(GOOD_ROOTS),
              "peer": 0, "stream": rng.choice(GOOD_STREAMS)}
    used = {"all_reduce": ["sendbuf", "recvbuf", "op", "stream"], "broadcast": ["sendbuf", "recvbuf", "root", "stream"],
            "reduce": ["sendbuf", "recvbuf", "op", "root", "stream"], "all_gather": ["sendbuf", "recvbuf", "stream"],
            "reduce_scatter": ["sendbuf", "recvbuf", "op", "stream"], "send": ["sendbuf", "peer", "stream"],
            "recv": ["recvbuf", "peer", "stream"]}[name]
    bad, keep = made_bad(rng, used), []
    if bad:
        if bad in ("sendbuf", "recvbuf"):
            two = "sendbuf" in used and "recvbuf" in used
            kind = rng.random()
            if kind < 0.7 or not two:
                values[bad], host = bad_buffers(rng)
                keep.append(host)
            elif kind < 0.85:  # another element type than the other buffer's
                values[bad] = device(N, rng.choice([d for d in DTYPES if d != dtype]))
            else:  # a receive buffer too small for the call
                bad = "recvbuf"
                values[bad] = device(N - rng.randrange(1, N), dtype)
        elif bad == "op":
            values["op"] = rng.choice(BAD_OPS)
        elif bad in ("root", "peer"):
            values[bad] = rng.choice(BAD_ROOTS)
        elif bad == "stream":
            values["stream"] = rng.choice(BAD_STREAMS)
    positional = [values[a] for a in used if a in ("sendbuf", "recvbuf")]
    keywords = {a: values[a] for a in used if a not in ("sendbuf", "recvbuf")}
    if name in ("send", "recv"):
        positional.append(keywords.pop("peer"))
    return name, positional, keywords, bad, keep + [send, recv]


class Python:
    """The context every Python class shares: communicators over the stand-in, made once."""

    def __init__(self):
        self.comm = ncclbind.Communicator.init(1, 0, ncclbind.UniqueId.generate())
        self.index = 0  # the case being made (child.py sets it)

    def close(self):
        self.comm.destroy()


def described(name: str, bad: str | None, positional: list, keywords: dict) -> str:
    values = [*positional, *keywords.values()]
    shown = ", ".join(f"{v!r:.160}" for v in values if not isinstance(v, DeviceArray))
    return f"{name} {bad or 'valid'} ({shown})"


def paired(comm, name: str, call: Callable[[], None]) -> Callable[[], None]:
    """send and recv on one rank: inside a group, with the other half (a lone one would hang)."""
    if name not in ("send", "recv"):
        return call
    other = (lambda: comm.recv(device(), 0)) if name == "send" else (lambda: comm.send(device(), 0))

    def in_group():
        with ncclbind.group():
            call()
            other()
    return in_group


def calls_class(rng: random.Random, ctx: Python) -> Case:
    name, positional, keywords, bad, keep = collective_call(rng, ctx.comm)
    method = getattr(ctx.comm, name)

    def call(keep=keep):
        method(*positional, **keywords)
    return Case(described(name, bad, positional, keywords), bad, paired(ctx.comm, name, call))


def prepare_class(rng: random.Random, ctx: Python) -> Case:
    name, positional, keywords, bad, keep = collective_call(rng, ctx.comm)
    method = getattr(ctx.comm, name)

    def call(keep=keep):
        prepared = ncclbind.prepare(method, *positional, **keywords)
        prepared()
        prepared()
    return Case("prepare " + described(name, bad, positional, keywords), bad, paired(ctx.comm, name, call))


BAD_COUNT_LISTS = [[-1], {0: N}, {N}, [1.5], ["4"], [N, N], [], [2 ** 63], [2 ** 64], [True], None, N,
                   [[N]], np.array([1.5]), Garbage(), "4", [N + 1]]
BAD_DISPLS = [[-1], {0: 0}, [1.5], [2 ** 63], [0, 0], "0", [N], Garbage(), np.array([0.5])]


def vcollectives_class(rng: random.Random, ctx: Python) -> Case:
    name = rng.choice(["all_gatherv", "reduce_scatterv", "all_to_allv"])
    send, recv = device(), device()
    counts, displs = [N], rng.choice([None, [0]])
    bad = made_bad(rng, ["counts", "displs"])
    if bad == "counts":
        counts = rng.choice(BAD_COUNT_LISTS)
    elif bad == "displs":
        displs = rng.choice(BAD_DISPLS)
    comm = ctx.comm
    if name == "all_gatherv":
        argument = {"counts": "recv_counts", "displs": "recv_displs"}[bad] if bad else None

        def call():
            comm.all_gatherv(send, recv, counts, displs)
    elif name == "reduce_scatterv":
        argument = {"counts": "recv_counts", "displs": "send_displs"}[bad] if bad else None

        def call():
            comm.reduce_scatterv(send, recv, counts, displs)
    else:
        side = rng.choice(["send", "recv"])
        argument = f"{side}_{bad}" if bad else None
        lists = {"send_counts": [N], "send_displs": [0], "recv_counts": [N], "recv_displs": [0]}
        if bad:
            lists[argument] = counts if bad == "counts" else displs

        def call():
            comm.all_to_allv(send, lists["send_counts"], lists["send_displs"], recv, lists["recv_counts"],
                             lists["recv_displs"])
    shown = (counts if bad == "counts" else displs) if bad else (counts, displs)
    return Case(f"{name} {argument or 'valid'} ({shown!r:.80})", argument, call)


# ncclConfig_t's fields by their C names (every ncclbind takes them), with valid values
CONFIG_FIELDS = {"blocking": [0, 1], "cgaClusterSize": [0, 1, 2, 4], "minCTAs": [1, 2], "maxCTAs": [16, 32],
                 "splitShare": [0, 1], "netName": ["Socket", "IB"], "commName": ["fuzz", "ranks-0"]}
BAD_CONFIG_VALUES = {"int": ["1", 1.5, 2 ** 40, -2 ** 40, Garbage(), [1], math.nan],
                     "str": ["\ud800", "a\0b", 7, Garbage()]}


def config_class(rng: random.Random, ctx: Python) -> Case:
    config = {k: rng.choice(v) for k, v in rng.sample(sorted(CONFIG_FIELDS.items()), rng.randrange(0, 4))}
    bad = None
    if rng.random() < 0.8:
        kind = rng.random()
        if kind < 0.2:
            bad = rng.choice(["noSuchField", "min_ctas_", "blockin", "\ud800"])
            config[bad] = 1
        elif kind < 0.3:
            config, bad = rng.choice([[("blocking", 1)], "blocking=1", 3, Garbage(), {1: 1}]), "config"
        else:
            bad = rng.choice(sorted(CONFIG_FIELDS))
            kind = "str" if isinstance(CONFIG_FIELDS[bad][0], str) else "int"
            config[bad] = rng.choice(BAD_CONFIG_VALUES[kind])

    def call():
        ncclbind.Communicator.init(1, 0, ncclbind.UniqueId.generate(), config=config).destroy()
    return Case(f"init config {bad or 'valid'} {config!r:.80}", bad if bad in (None, "config") else "config", call)


BAD_TIMEOUTS = [math.nan, math.inf, -1.0, 0, "1", None, True, Garbage(), -math.inf, 1e308 * 10]
BAD_POLLS = [0, -1, math.inf, math.nan, "x", 1e-9, True, Garbage(), 10.0]


def watchdog_class(rng: random.Random, ctx: Python) -> Case:
    timeout, poll = rng.choice([0.5, 1.0, 2.0]), rng.choice([None, 0.01, 0.05])
    bad = made_bad(rng, ["timeout_s", "poll_s"])
    if bad == "timeout_s":
        timeout = rng.choice(BAD_TIMEOUTS)
    elif bad == "poll_s":
        poll = rng.choice(BAD_POLLS)
    comm = ctx.comm

    def call():
        with comm.watchdog(timeout, poll_s=poll):
            comm.all_reduce(device(), device())
    return Case(f"watchdog {bad or 'valid'} ({timeout!r}, {poll!r})", bad, call)


def misc_class(rng: random.Random, ctx: Python) -> Case:
    """Module-level conversions the issue found raising from inside the package."""
    kind = rng.choice(["pre_mul_sum", "dtype", "unique_id", "error_string", "params"])
    comm = ctx.comm
    if kind == "pre_mul_sum":
        scalar, dtype = rng.choice([(2.0, "float32"), (3, "int32"), (2.5, "float64"), (7, "uint8")])
        bad = None
        if rng.random() < 0.85:
            bad = rng.choice(["scalar", "datatype"])
            if bad == "scalar":
                integer = dtype in ("int32", "uint8")  # NaN, inf and fractions are values of a float type
                scalar = rng.choice(["2", Garbage(), None, [2.0]] +
                                    ([math.nan, math.inf, 1.5, 2 ** 80] if integer else []) +
                                    ([-1, 256] if dtype == "uint8" else []))
            else:
                dtype = rng.choice(["floaty", "\ud800", "", 99, Garbage(), "uint8 ", 2.5])

        def call():
            comm.create_pre_mul_sum(scalar, dtype).close()  # NCCL holds few custom ops at once
        return Case(f"create_pre_mul_sum({scalar!r}, {dtype!r})", bad, call)
    if kind == "dtype":
        value = rng.choice(["floaty", "\ud800", "", "float32\0", "f4x", 99, -1, 2 ** 70, Garbage(), 1.5, None,
                            "Float32 ", "float32", 7])
        # an int is a value of the open enum (a newer NCCL's type): accepted here, checked where used
        either = isinstance(value, int) and -2 ** 31 <= value < 2 ** 31

        def call():  # from_dtype: the conversion every ncclbind has (NcclDataType(str) is nccl4py's, newer)
            ncclbind.NcclDataType.from_dtype(value)
        return Case(f"NcclDataType.from_dtype({value!r})", None if either or value == "float32" else "value", call,
                    either=either)
    if kind == "unique_id":
        value = rng.choice([bytes(rng.randrange(0, 300)), "x" * 128, 128, 1.5, Garbage(), bytearray(127),
                            [0] * 128, bytes(129)])
        good = isinstance(value, (bytes, bytearray)) and len(value) == 128

        def call():
            ncclbind.UniqueId(value)
        return Case(f"UniqueId(<{type(value).__name__} {len(value) if hasattr(value, '__len__') else ''}>)",
                    None if good else "value", call)
    if kind == "error_string":
        value = rng.choice([rng.randrange(-2 ** 40, 2 ** 40), "3", 1.5, Garbage(), None, 2 ** 70])

        def call():
            ncclbind._nccl.get_error_string(value)  # the raw call: its public name is newer
        good = isinstance(value, int) and -2 ** 31 <= value < 2 ** 31
        return Case(f"get_error_string({value!r})", None if good else "result", call)
    value = rng.choice(["\ud800", "x" * 100000, "", 7, Garbage(), None, "NCCL_DEBUG\0", "NCCL_DEBUG"])

    def call():  # a Mapping's get: any key is valid (None when absent), or refused by name
        ncclbind.params.get(value)
    return Case(f"params.get({value!r:.40})", None, call, either=True)


def ep_class(rng: random.Random, ctx: Python) -> Case:
    """NCCL EP over its stand-in: a low-latency group and handle, then a dispatch, one of their
    arguments made bad (shapes, element types, extents, the group's limits)."""
    from ncclbind import ep
    experts, tokens, top_k, hidden, most = 8, 5, 2, 512, 8
    config = dict(algorithm="low_latency", num_experts=experts, max_dispatch_tokens_per_rank=most,
                  max_token_bytes=hidden * 4)
    routing = np.stack([np.arange(tokens) % experts, (np.arange(tokens) + 1) % experts], axis=1).astype(np.int64)
    token_rows = np.ones((tokens, hidden), np.float32)
    recv = np.zeros((experts, most, hidden), np.float32)
    bad = None
    if rng.random() < 0.85:
        bad = rng.choice(["config", "topk_idx", "inputs.tokens", "outputs.tokens"])
        if bad == "config":
            field = rng.choice(["num_experts", "max_dispatch_tokens_per_rank", "max_token_bytes", "algorithm"])
            config[field] = rng.choice({"algorithm": ["fast", "", 3, "\ud800"],
                                        "num_experts": [0, -1, 2 ** 40, "8", 1.5],
                                        "max_dispatch_tokens_per_rank": [0, -1, 2 ** 40, None],
                                        "max_token_bytes": [-1, 2 ** 40, "x"]}[field])
        elif bad == "topk_idx":
            routing = rng.choice([routing.astype(np.float32), routing[:, :1].T.copy(), routing.ravel().copy(),
                                  np.full((most + 1, top_k), 1, np.int64), np.zeros((tokens, experts + 1), np.int64)])
        elif bad == "inputs.tokens":
            token_rows = rng.choice([token_rows.astype(np.float64), np.ones((tokens + 1, hidden), np.float32),
                                     np.ones((tokens, 0), np.float32), np.ones(hidden, np.float32),
                                     np.ones((tokens, hidden * 8), np.float32)])
            if token_rows.ndim == 2 and token_rows.shape[1] == hidden * 8:
                recv = np.zeros((experts, most, hidden * 8), np.float32)  # consistent, but rows too wide
        else:
            recv = rng.choice([np.zeros((experts, most, hidden * 2), np.float32), np.zeros((most, hidden), np.float32),
                               np.zeros((experts, most, hidden), np.float64)])
    comm = ctx.comm

    def call():
        group = ep.Group.create(comm, ep.GroupConfig(**config))
        try:
            handle = group.create_handle("expert_major", DeviceArray(routing))
            try:
                handle.dispatch(ep.DispatchInputs(DeviceArray(token_rows)), ep.DispatchOutputs(DeviceArray(recv)))
            finally:
                handle.destroy()
        finally:
            group.destroy()
    shapes = f"config {config}, routing {routing.dtype}{routing.shape}, tokens {token_rows.dtype}{token_rows.shape}, " \
             f"received {recv.dtype}{recv.shape}"
    return Case(f"ep {bad or 'valid'}: {shapes}", bad, call)


def threads_judge(error: AssertionError) -> str:
    """The stress test's failed check as an outcome: a free under a call, or a second free, is a
    use after free on NCCL (a crash); a thread that never ends hangs; another exception is raw."""
    text = str(error)
    if "freed" in text:
        return "crash"
    return "hang" if "hangs" in text else "raw"


def threads_class(rng: random.Random, ctx: Python) -> Case:
    """One seeded schedule of tests/python/test_concurrency_stress.py: 2-6 threads calling through
    every path while destroy/abort run at a seeded moment (the child runs with that module's
    NCCLBIND_FAKE_NCCL_ACTIVE set, so its checks are defined)."""
    import test_concurrency_stress as stress
    seed = rng.randrange(1 << 30)

    def call():
        stress.test_random_interleavings_of_calls_and_closes_keep_the_model(seed)
    return Case(f"threads seed {seed}", None, call, judge=threads_judge)


CLASSES = {"calls": calls_class, "prepare": prepare_class, "vcollectives": vcollectives_class,
           "config": config_class, "watchdog": watchdog_class, "misc": misc_class, "ep": ep_class,
           "threads": threads_class}


def self_test_class(rng: random.Random, ctx: Python) -> Case:
    """One case of each outcome, by index, for the driver's own test (test_fuzz.py)."""
    import ctypes
    import time

    def refused():
        raise ncclbind.errors.NcclInvalid("refused by name", "x")

    def raw():
        raise KeyError("from inside")
    cases = [Case("valid, taken", None, lambda: None), Case("bad, refused", "x", refused),
             Case("bad, taken", "x", lambda: None), Case("bad, KeyError", "x", raw),
             Case("valid, refused", None, refused), Case("crash", None, lambda: ctypes.string_at(0)),
             Case("hang", None, lambda: time.sleep(600))]
    return cases[ctx.index]


SELF_TEST = {"self_test": self_test_class}  # run only where NCCLBIND_FUZZ_SELF_TEST is set
