"""Teams, rank conversion, NCCL's parameter registry and the LL all-to-all slot count, as
generated from policy (returns = "value" calls, a team record passed by value, string
arguments, string and string-table outs, a caller buffer NCCL fills, module owners).

Over the stand-in libnccl (fake_nccl.c, 2.28.9, which has none of these functions): every
method raises NcclSymbolNotFoundError naming the function and its first release (read from
the IR), nothing returned silently, and every bad argument is rejected by name first. Over
every header set's real libnccl (subprocesses): the parameter registry and the slot count work
where the IR says the library has them (no GPU needed), and raise where it does not."""
from __future__ import annotations

import ctypes
import json
import os
import types

import pytest

from stand_ins import INSIDE, run_over_stand_in


def since_of(api, function):
    return next(f["since"] for f in api["nccl"]["functions"] if f["name"] == function)


if not INSIDE:
    from conftest import nccl_library_of
    from test_version_gating import RELEASES, run_with_library

    def test_over_the_stand_in_library(tmp_path):
        run_over_stand_in(__file__, tmp_path)

    # In the subprocess: each call's result, or the error's type, function and message, as
    # JSON in the file REPORT names (stdout holds what ncclParamDumpAll prints).
    EVERY_LIBRARY = """
        import json
        import os
        import ncclbind

        def outcome(call):
            try:
                return {"value": call()}
            except ncclbind.NcclError as e:
                return {"error": type(e).__name__, "function": getattr(e, "function", None), "message": str(e)}

        keys = outcome(ncclbind.params.keys)
        found = keys.get("value") or ["NCCL_DEBUG"]
        report = {
            "loaded": ncclbind.version_code(),
            "keys": keys,
            "get": {key: outcome(lambda: ncclbind.params.get(key)) for key in found},
            "get_bytes": {key: outcome(lambda: ncclbind.params.bind(key).get_bytes().hex()) for key in found},
            "unknown_key": outcome(lambda: ncclbind.params.get("NCCLBIND_NO_SUCH_PARAMETER")),
            "dump": outcome(ncclbind.params.dump),
            "slots": [outcome(lambda: ncclbind.dev_comm.lla2a_calc_slots(n, 8)) for n in (1, 1024, 65536)],
        }
        with open(os.environ["REPORT"], "w") as f:
            json.dump(report, f)
    """

    @pytest.mark.parametrize("version, header_set", RELEASES, ids=[name for _, name in RELEASES])
    def test_every_libnccl_has_the_registry_and_slot_count_from_its_first_release(api, version, header_set, tmp_path):
        library = nccl_library_of(api, version)
        if library is None:
            pytest.skip(f"{header_set}: no libnccl of NCCL {version} here (run tools/setup.sh)")
        result = run_with_library(library, EVERY_LIBRARY, REPORT=str(tmp_path / "report.json"))
        assert result.returncode == 0, result.stderr[-4000:]
        report = json.loads((tmp_path / "report.json").read_text())
        codes = api["nccl"]["version_codes"]
        has = {f: report["loaded"] >= codes[since_of(api, f)]
               for f in ("ncclParamGetAllParameterKeys", "ncclParamGetParameter", "ncclParamBind", "ncclParamGet",
                         "ncclParamDumpAll", "ncclLLA2ACalcSlots")}

        def missing(outcome, function):
            assert outcome.get("error") == "NcclSymbolNotFoundError", outcome
            assert outcome["function"] == function and since_of(api, function) in outcome["message"], outcome

        if has["ncclParamGetAllParameterKeys"]:
            keys = report["keys"]["value"]
            assert keys and all(isinstance(k, str) and k for k in keys) and len(set(keys)) == len(keys)
        else:
            missing(report["keys"], "ncclParamGetAllParameterKeys")
        for key, outcome in report["get"].items():
            if has["ncclParamGetParameter"]:
                assert isinstance(outcome["value"], str), (key, outcome)
            else:
                missing(outcome, "ncclParamGetParameter")
        for key, outcome in report["get_bytes"].items():
            if has["ncclParamBind"] and has["ncclParamGet"]:
                assert bytes.fromhex(outcome["value"]), (key, outcome)  # NCCL wrote at least one byte
            else:
                missing(outcome, "ncclParamBind")
        if has["ncclParamGetParameter"]:  # NCCL's refusal reaches the caller
            assert report["unknown_key"].get("error", "").startswith("Nccl"), report["unknown_key"]
            assert report["unknown_key"]["error"] != "NcclSymbolNotFoundError"
        if has["ncclParamDumpAll"]:
            assert report["dump"] == {"value": None}
        else:
            missing(report["dump"], "ncclParamDumpAll")
        if has["ncclLLA2ACalcSlots"]:
            slots = [o["value"] for o in report["slots"]]
            assert all(type(s) is int and s > 0 for s in slots) and slots == sorted(slots), slots
        else:
            for outcome in report["slots"]:
                missing(outcome, "ncclLLA2ACalcSlots")

else:
    import ncclbind
    from ncclbind import Communicator, Param, Team, UniqueId
    from ncclbind._generated import (communicator_methods, dev_comm_functions, param_methods,
                                     params_functions)
    from ncclbind.errors import NcclInvalid, NcclSymbolNotFoundError

    @pytest.fixture
    def comm():
        c = Communicator.init(1, 0, UniqueId.generate())
        yield c
        if not c.closed:
            c.destroy()

    def one_rank_team():
        return Team(nRanks=1, rank=0, stride=1)

    # A handle the stand-in never sees: it lacks every ncclParam* function.
    PARAM = Param(0x1000)

    GOOD_CALLS = {
        "team_world": lambda c: c.team_world,
        "team_lsa": lambda c: c.team_lsa,
        "team_rail": lambda c: c.team_rail,
        "team_cft": lambda c: c.team_cft(),
        "team_cft_multimem": lambda c: c.team_cft_multimem,
        "team_rank_to_world": lambda c: c.team_rank_to_world(one_rank_team(), 0),
        "team_rank_to_lsa": lambda c: c.team_rank_to_lsa(one_rank_team(), 0),
        "lla2a_calc_slots": lambda c: ncclbind.dev_comm.lla2a_calc_slots(1024, 8),
        "keys": lambda c: ncclbind.params.keys(),
        "get": lambda c: ncclbind.params.get("NCCL_DEBUG"),
        "bind": lambda c: ncclbind.params.bind("NCCL_DEBUG"),
        "dump": lambda c: ncclbind.params.dump(),
        **{f"get_{t}{bits}": (lambda name: lambda c: getattr(PARAM, name)())(f"get_{t}{bits}")
           for t in "iu" for bits in (8, 16, 32, 64)},
        "get_str": lambda c: PARAM.get_str(),
        "get_bytes": lambda c: PARAM.get_bytes(),
    }

    def specs():
        """Every generated call of these owners: the team methods of Communicator, Param's
        methods, and the functions of ncclbind.params and ncclbind.dev_comm."""
        for module in (communicator_methods, param_methods, params_functions, dev_comm_functions):
            for name, function in module.CALLS.items():
                if module is not communicator_methods or name.startswith("team_"):
                    yield types.SimpleNamespace(name=name, function=function)

    def stand_in_has(function) -> bool:
        return hasattr(ctypes.CDLL(os.environ["NCCLBIND_NCCL_PATH"]), function)

    def test_every_call_is_exercised_here():
        assert {spec.name for spec in specs()} == set(GOOD_CALLS)

    @pytest.mark.parametrize("spec", list(specs()), ids=lambda s: s.name)
    def test_a_function_the_stand_in_lacks_raises_naming_its_first_release(comm, api, spec):
        if stand_in_has(spec.function):
            pytest.skip(f"the stand-in has {spec.function}")
        with pytest.raises(NcclSymbolNotFoundError) as info:
            GOOD_CALLS[spec.name](comm)
        message = str(info.value)
        assert info.value.function == spec.function
        assert spec.function in message and since_of(api, spec.function) in message, message
        assert str(ncclbind.library_info("nccl").version) in message
        assert not comm.closed

    @pytest.mark.parametrize("call, argument", [
        (lambda c: c.team_rank_to_world("world", 0), "team"),
        (lambda c: c.team_rank_to_world(None, 0), "team"),
        (lambda c: c.team_rank_to_lsa(ncclbind._nccl.ncclConfig_t(), 0), "team"),
        (lambda c: c.team_rank_to_world(Team(nRanks=2, rank=0, stride=1), 2), "team_rank"),
        (lambda c: c.team_rank_to_world(one_rank_team(), -1), "team_rank"),
        (lambda c: c.team_rank_to_lsa(one_rank_team(), True), "team_rank"),
        (lambda c: c.team_rank_to_lsa(one_rank_team(), 0.0), "team_rank"),
        (lambda c: c.team_cft(7), "mode"),
        (lambda c: c.team_cft(False), "mode"),
        (lambda c: ncclbind.params.get(b"NCCL_DEBUG"), "key"),
        (lambda c: ncclbind.params.get("NCCL\0DEBUG"), "key"),
        (lambda c: ncclbind.params.bind(None), "key"),
        (lambda c: PARAM.get_bytes(-1), "max_len"),
        (lambda c: PARAM.get_bytes(2 ** 31), "max_len"),
        (lambda c: ncclbind.dev_comm.lla2a_calc_slots(2 ** 31, 8), "max_elts"),
        (lambda c: ncclbind.dev_comm.lla2a_calc_slots(1024, "8"), "max_elt_size"),
    ])
    def test_bad_arguments_are_rejected_before_nccl_is_called(comm, call, argument):
        with pytest.raises(NcclInvalid) as info:  # not NcclSymbolNotFoundError: checked first
            call(comm)
        assert info.value.argument == argument and argument in str(info.value)

    def test_a_rank_message_names_the_teams_ranks(comm):
        with pytest.raises(NcclInvalid, match=r"team_rank: 3 is not a rank of team \(0\.\.1: its nRanks is 2\)"):
            comm.team_rank_to_world(Team(nRanks=2, rank=1, stride=1), 3)

    def test_a_destroyed_communicator_is_rejected(comm):
        comm.destroy()
        with pytest.raises(NcclInvalid, match="destroyed"):
            comm.team_world

    def test_the_names_and_signatures():
        import inspect
        assert ncclbind.Team is ncclbind._nccl.ncclTeam_t
        assert ncclbind.params.Param is Param
        assert sorted(ncclbind.params.__all__) == ["Param", "bind", "dump", "dump_params", "get", "keys"]
        assert str(inspect.signature(Communicator.team_rank_to_world)) == \
            "(self, team: '_nccl.ncclTeam_t', team_rank: 'int') -> 'int'"
        assert str(inspect.signature(Param.get_bytes)) == "(self, max_len: 'int' = 256) -> 'bytes'"
        assert str(inspect.signature(ncclbind.params.keys)) == "() -> 'list[str]'"
