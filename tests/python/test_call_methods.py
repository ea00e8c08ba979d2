"""The host calls generated from policy (kind = "call"): every argument is
checked before NCCL is called (ints not bools, in the C type's range; enums by value;
unique ids and configs by type), and a call the loaded library lacks raises
NcclSymbolNotFoundError naming the function and its first release (read from the IR),
with nothing made before it. Runs over the stand-in libnccl (fake_nccl.c, 2.28.9)."""
from __future__ import annotations

import inspect
import json
import os
import pathlib
import types

import pytest

from stand_ins import INSIDE, run_over_stand_in

if not INSIDE:
    def test_host_calls_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

else:
    import ncclbind
    from ncclbind import Communicator, UniqueId
    from ncclbind._generated import communicator_methods, window_methods
    from ncclbind.errors import NcclInvalid, NcclSymbolNotFoundError
    from ncclbind.nccl_enums import NcclCommMemStat
    from stand_ins import device_array

    IR_DIR = pathlib.Path(os.environ.get("NCCLBIND_IR_DIR", pathlib.Path(__file__).resolve().parents[2] / "bindings/ir"))

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        c.destroy()

    @pytest.fixture
    def window(comm):
        with comm.register_window(device_array([1, 2, 3, 4])) as w:
            yield w

    def since_of(api, function):
        return next(f["since"] for f in api["nccl"]["functions"] if f["name"] == function)

    def newer_than_loaded(api, function) -> bool:
        return api["nccl"]["version_codes"][since_of(api, function)] > ncclbind.version_code()

    def argument(comm, parameter):
        """A valid value for a required parameter of a generated call, by its annotation (a team,
        a record of the extension) or, for the one int whose valid values depend on the
        communicator, its name: a new call whose parameters are of these kinds needs no edit here."""
        annotation = str(parameter.annotation)
        if "ncclTeam_t" in annotation or annotation.endswith("Team"):
            return ncclbind.Team(nRanks=1, rank=0, stride=1)
        if annotation.startswith("_nccl."):
            return getattr(ncclbind._nccl, annotation.removeprefix("_nccl."))()
        if parameter.name == "nranks":  # grow: more ranks than the communicator has
            return comm.nranks + 1
        if annotation.startswith("int"):
            return 0  # ranks, peers, offsets, flags, enum values: 0 is valid for one rank
        raise AssertionError(f"no argument for {parameter} (annotation {annotation!r}): teach argument() its kind")

    def good_call(name, owner_class):
        """The generated call `name` with every required argument valid (argument()), as a
        function of (communicator, window); a property is read."""
        attribute = inspect.getattr_static(owner_class, name)
        if isinstance(attribute, property):
            return lambda c, w: getattr(c if owner_class is Communicator else w, name)
        required = [p for p in list(inspect.signature(attribute).parameters.values())[1:]
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

        def call(c, w):
            owner = c if owner_class is Communicator else w
            return getattr(owner, name)(*(argument(c, p) for p in required))
        return call

    OWNERS = ((communicator_methods, Communicator), (window_methods, ncclbind.RegisteredWindowHandle))
    GOOD_CALLS = {name: good_call(name, cls) for module, cls in OWNERS for name in module.CALLS}

    def every_call():
        """(name, NCCL function) of every generated host call of these owners (their CALLS)."""
        for module, _ in OWNERS:
            for name, function in module.CALLS.items():
                yield types.SimpleNamespace(name=name, function=function)

    def newer_than_the_stand_in():
        """The calls whose function the loaded stand-in lacks: first in a later release (the IR)."""
        api = {"nccl": json.loads((IR_DIR / "api" / "nccl.json").read_text())}
        return [spec for spec in every_call() if newer_than_loaded(api, spec.function)]

    def test_every_generated_call_is_exercised_here(comm, window):
        """Every generated call gets valid arguments from argument() alone: it runs, or (newer than
        the stand-in) says which release has it; no other outcome."""
        assert {spec.name for spec in every_call()} == set(GOOD_CALLS)
        for spec in every_call():
            try:
                GOOD_CALLS[spec.name](comm, window)
            except NcclSymbolNotFoundError as e:
                assert e.function == spec.function

    @pytest.mark.parametrize("spec", newer_than_the_stand_in(), ids=lambda s: s.name)
    def test_a_call_the_loaded_library_lacks_names_its_first_release(comm, window, api, spec):
        owned = dict(comm._resources)
        with pytest.raises(NcclSymbolNotFoundError) as info:
            GOOD_CALLS[spec.name](comm, window)
        message = str(info.value)
        assert info.value.function == spec.function
        assert spec.function in message and since_of(api, spec.function) in message
        assert str(ncclbind.library_info("nccl").version) in message
        assert comm._resources == owned and not comm.closed  # nothing half-made (grow: no new owner)

    @pytest.mark.parametrize("call, argument", [
        (lambda c, w: c.suspend(True), "flags"),
        (lambda c, w: c.suspend("1"), "flags"),
        (lambda c, w: c.suspend(2 ** 31), "flags"),
        (lambda c, w: c.suspend(-2 ** 31 - 1), "flags"),
        (lambda c, w: c.mem_stats(99), "stat"),
        (lambda c, w: c.mem_stats(False), "stat"),
        (lambda c, w: c.mem_stats(None), "stat"),
        (lambda c, w: c.grow(True, None), "nranks"),
        (lambda c, w: c.grow(2, "an id"), "unique_id"),
        (lambda c, w: c.grow(2, bytes(5)), "unique_id"),
        (lambda c, w: c.grow(2, None, 1.0), "rank"),
        (lambda c, w: c.grow(2, None, config="blocking"), "config"),
        (lambda c, w: w.lsa_pointer(0, -1), "offset"),
        (lambda c, w: w.lsa_pointer(0, 2 ** 64), "offset"),
        (lambda c, w: w.peer_pointer(2 ** 31), "peer"),
        (lambda c, w: w.multimem_pointer(False), "offset"),
        (lambda c, w: w.cft_le_info(1, ncclbind.Team(nRanks=1, rank=0, stride=1)), "peer_cft"),
        (lambda c, w: w.cft_le_info(0, (1, 0, 1)), "cft_team"),
    ])
    def test_bad_arguments_are_rejected_before_nccl_is_called(comm, window, call, argument):
        with pytest.raises(NcclInvalid) as info:
            call(comm, window)
        assert info.value.argument == argument and argument in str(info.value)

    def test_a_closed_owner_is_rejected(comm):
        window = comm.register_window(device_array([1.0, 2.0]))
        window.close()
        with pytest.raises(NcclInvalid, match="closed"):
            window.get_lsa_device_pointer(0)
        other = Communicator.init(1, 0, UniqueId.generate())
        other.destroy()
        with pytest.raises(NcclInvalid, match="destroyed"):
            other.resume()

    def test_the_signatures(comm):
        import inspect
        grow = inspect.signature(Communicator.grow)
        assert str(grow.replace(return_annotation=inspect.Signature.empty)) == \
            "(self, nranks: 'int', unique_id: 'UniqueIdLike | None' = None, rank: 'int | None' = None, " \
            "config: 'CommConfigLike | None' = None, **config_fields: 'Any')"  # nccl4py's, and config fields
        assert grow.return_annotation == "Communicator"
        assert str(inspect.signature(ncclbind.RegisteredWindowHandle.peer_pointer)) == \
            "(self, peer: 'int', offset: 'int' = 0) -> 'int | None'"
