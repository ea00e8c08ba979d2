"""Property-based tests (hypothesis) of the Pythonic layer over the stand-in libnccl
(fake_nccl.c: one-rank collectives on host memory; two-rank communicators check arguments).

Every generated method (ncclbind._generated.communicator_methods.METHODS) is called with
random arguments: buffers of random kind (torch-like tensors, CUDA array interface objects,
(pointer, count, dtype[, device]) specs, None, garbage), dtype, length, device and
read-only flag; ranks, ops (names, ints, bools, NcclRedOp, a CustomRedOp), streams (ints,
negative, bools, strings) and per-call configs (dicts, records, garbage). Each call either
succeeds with the right data, or raises NcclInvalid naming one of the method's arguments, or
an NcclError of NCCL's (the stand-in's) naming the NCCL function; never another exception.
The method as called (the C fast path) ends exactly as its Python definition
(type(comm).method.__wrapped__) ends, and leaves the same data.

Seeded and bounded: derandomize=True, no example database, MAX_EXAMPLES per property. The
library is chosen once per process, so the module runs itself again over the stand-in
(stand_ins.py); under Bazel each case is its own target (tests/python/BUILD).
"""
from __future__ import annotations

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_properties_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import numpy as np
    import pytest
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import ncclbind
    from ncclbind import Communicator, NcclRedOp, UniqueId, _nccl, group
    from ncclbind._generated.communicator_methods import METHODS
    from ncclbind.errors import NcclError, NcclInvalid
    from stand_ins import install_torch
    from stand_ins import DeviceArray

    MAX_EXAMPLES = 200
    bounded = settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                       suppress_health_check=list(HealthCheck))

    torch = install_torch()
    torch.float64 = type(torch.float32)("float64")
    DTYPES = ["float32", "float16", "int32", "int64", "uint8", "float64"]
    # What the stand-in's one rank leaves in recvbuf: sendbuf's elements (every op of one rank),
    # scaled by the CustomRedOp's scalar (float32 only: the op is made for float32).
    SCALAR = 2.0

    class Garbage:
        """Not a buffer, a stream, an op or a config of any kind."""

        def __repr__(self):
            return "Garbage()"

    @pytest.fixture(scope="module")
    def comms():
        one = Communicator.init(1, 0, UniqueId.generate())
        two = Communicator.init_all([0, 0])
        custom = one.create_pre_mul_sum(SCALAR, "float32")
        yield {"one": one, "two": two[0], "custom": custom}
        for c in (one, *two):
            c.destroy()

    # ---- strategies ------------------------------------------------------------------

    @st.composite
    def buffers(draw):
        """A buffer argument: (object, its elements as a list or None, writable)."""
        kind = draw(st.sampled_from(["torch"] * 4 + ["cai", "cai", "spec", "spec", "none", "garbage"]))
        if kind == "none":
            return None
        if kind == "garbage":
            return draw(st.sampled_from(["x", 3, 1.5, True, b"\0" * 8, (1, 2), Garbage()]))
        dtype = draw(st.sampled_from(["float32"] * 6 + DTYPES))  # mostly the others' dtype and count:
        n = draw(st.sampled_from([2] * 6 + list(range(6))))     # calls that pass reach every check

        values = np.arange(1, n + 1).astype(dtype)
        device = draw(st.sampled_from([0] * 6 + [1]))
        if kind == "torch":
            return torch.Tensor(values, dtype, index=device)
        if kind == "cai":
            return DeviceArray(np.ascontiguousarray(values), readonly=draw(st.booleans()))
        array = np.ascontiguousarray(values)
        holder = Holder(array)
        spec = (array.ctypes.data or 0, draw(st.sampled_from([n, n, n + 1, -1, True])), dtype)
        holder.spec = spec + ((device,) if draw(st.booleans()) else ())
        return holder

    class Holder:
        """An explicit (pointer, count, dtype[, device]) spec and the array it points into."""

        def __init__(self, array):
            self.array, self.spec = array, None

    ranks = st.one_of(st.just(0), st.integers(-2, 3), st.sampled_from([True, False, "0", None, 1.0, 2 ** 40]))
    ops = st.one_of(st.sampled_from(list(NcclRedOp)), st.sampled_from(["sum", "MAX", "prod", "custom"]),
                    st.integers(-2, 6), st.sampled_from(["median", "", True, False, 2 ** 40, 1.5, None, Garbage()]))
    streams = st.one_of(st.sampled_from([None, 0, 0, -1, 2 ** 64, 2 ** 63, True, False, "default", 1.5,
                                         Garbage()]), st.integers(0, 2 ** 20))
    configs = st.sampled_from([None, None, {}, {"minCTAs": 1}, {"noSuchField": 1}, {"minCTAs": "x"},
                               "record", "fast", 3, Garbage()])

    def arguments(spec, draw_buffer, rank, op, stream, config):
        values = {b.argument: draw_buffer(b) for b in spec.buffers}
        if spec.rank_argument:
            values[spec.rank_argument] = rank
        if "op" in spec.order:
            values["op"] = op
        values["stream"] = stream
        if spec.config_low_level:
            values["config"] = config
        return values

    # ---- the oracle ----------------------------------------------------------------

    def concrete(values, comms):
        """The call's keyword arguments: specs as tuples, the named placeholders made."""
        out = {}
        for name, v in values.items():
            if isinstance(v, Holder):
                v = v.spec
            elif v == "custom" and name == "op":
                v = comms["custom"]
            elif v == "record" and name == "config":
                v = _nccl.nccl_collconfig_initializer()
            out[name] = v
        return out

    def arrays(values):
        return {k: v.array for k, v in values.items() if hasattr(v, "array") and v.array is not None}

    def ending(spec, call, kwargs):
        """None, or what the call raised: its type, text and argument (or function)."""
        try:
            if spec.name in ("send", "recv"):
                with group():
                    call(**kwargs)
            else:
                call(**kwargs)
        except NcclInvalid as e:
            return ("NcclInvalid", str(e), e.argument)
        except NcclError as e:
            return (type(e).__name__, str(e), getattr(e, "function", None))
        return None

    def expected_recv(spec, before, kwargs):
        """What recvbuf holds after a successful one-rank call, from what the buffers held
        before it (None: not checked): sendbuf's elements, whatever the collective."""
        if spec.name in ("send", "recv") or "sendbuf" not in before:
            return None
        data = before["sendbuf"]
        if kwargs.get("op") is not None and not isinstance(kwargs.get("op"), (int, str)):
            data = (data * SCALAR).astype(data.dtype)  # the CustomRedOp
        return data

    def check_one_call(spec, comm, values, comms):
        kwargs = concrete(values, comms)
        held = arrays(values)
        before = {k: a.copy() for k, a in held.items()}
        fast = ending(spec, getattr(comm, spec.name), kwargs)
        fast_after = {k: a.copy() for k, a in held.items()}
        for k, a in held.items():
            if a.flags.writeable:
                a[...] = before[k]
        reference = getattr(type(comm), spec.name).__wrapped__
        python = ending(spec, lambda **kw: reference(comm, **kw), kwargs)
        assert fast == python, (spec.name, kwargs, fast, python)
        for k, a in held.items():
            assert np.array_equal(fast_after[k], a), (spec.name, k)
        if fast is None:
            recv = values.get("recvbuf")
            want = expected_recv(spec, before, kwargs) if comm is comms["one"] else None
            if want is not None and recv is not None and hasattr(recv, "array"):
                assert np.array_equal(recv.array[:want.size].ravel(), want.ravel()), (spec.name, kwargs)
        elif fast[0] == "NcclInvalid":
            assert fast[2] in set(kwargs) and fast[2] in fast[1], (spec.name, fast)
        else:
            assert fast[2] in (spec.function, spec.function + "Config"), (spec.name, fast)

    # ---- the properties ------------------------------------------------------------

    @pytest.mark.parametrize("spec", METHODS, ids=[m.name for m in METHODS])
    def test_every_method_with_random_arguments_ends_as_its_python_definition(comms, spec):
        @bounded
        @given(data=st.data(), nranks=st.sampled_from(["one", "one", "one", "two"]), rank=ranks, op=ops,
               stream=streams, config=configs, in_place=st.booleans())
        def run(data, nranks, rank, op, stream, config, in_place):
            values = arguments(spec, lambda b: data.draw(buffers(), label=b.argument), rank, op, stream, config)
            for b in spec.buffers:
                if in_place and b.in_place_of is not None:
                    values[b.argument] = values[b.in_place_of]
            check_one_call(spec, comms[nranks], values, comms)
        run()

    @bounded
    @given(config=st.one_of(st.none(), st.dictionaries(st.sampled_from(["blocking", "comm_name", "cgaClusterSize",
                                                                         "cga_cluster_size", "minCTAs", "nope",
                                                                         "version", "ctaPolicy"]),
                                                       st.one_of(st.integers(-5, 2 ** 33), st.sampled_from(["", "x", "IB", "\0", "é" * 3]),
                                                                 st.booleans(), st.none()), max_size=3),
                                       st.sampled_from(["record", "fast", 3, Garbage(), [1]])))
    def test_communicator_init_with_random_configs_succeeds_or_names_config(config):
        if config == "record":
            config = _nccl.nccl_config_initializer()
        try:
            comm = Communicator.init(1, 0, UniqueId.generate(), config=config)
        except NcclInvalid as e:
            assert e.argument and e.argument in str(e), str(e)
        except NcclError as e:
            assert getattr(e, "function", None), repr(e)
        else:
            comm.destroy()

    @bounded
    @given(spec=st.sampled_from(METHODS), op=ops, stream=streams)
    def test_every_method_after_destroy_raises_naming_comm(spec, op, stream):
        comm = Communicator.init(1, 0, UniqueId.generate())
        comm.destroy()
        values = arguments(spec, lambda b: torch.Tensor([1, 2]), 0, op, stream, None)
        kwargs = {k: v for k, v in values.items() if not (k == "op" and v == "custom")}
        for call in (getattr(comm, spec.name), lambda **kw: getattr(type(comm), spec.name).__wrapped__(comm, **kw)):
            outcome = ending(spec, call, kwargs)
            assert outcome is not None and outcome[0] == "NcclInvalid", outcome
            assert outcome[2] in set(kwargs) | {"comm"}, outcome
