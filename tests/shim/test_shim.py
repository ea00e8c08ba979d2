"""The interposition library over the stand-in libnccl (tests/python/fake_nccl.c): programs
that call NCCL (a C program linked to libnccl.so.2, a Python program through ctypes, one
through ncclbind's runtime) run under the shim, and their traces, counters, results, errno,
modes, forks, threads, gating, checkpoints and divergence reports are checked against what
the programs say they issued and against the IR.

Inputs (Bazel sets them; by hand: build them and export the same names):
  NCCLBIND_SHIM_LIBS   the shim variants (//bindings/shim:libraries), space-separated
  NCCLBIND_FAKE_NCCL   the stand-in libnccl (//tests/python:libnccl_fake.so)
"""
from __future__ import annotations

import collections
import ctypes
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
API = json.loads((ROOT / "bindings" / "ir" / "api" / "nccl.json").read_text())
RELEASES = API["versions"]
OLDEST = RELEASES[0]


def shim_libraries() -> dict[str, pathlib.Path]:
    libs = {}
    for path in os.environ.get("NCCLBIND_SHIM_LIBS", "").split():
        m = re.search(r"libncclbind_shim-nccl-([\d.]+)\.so$", path)
        if m:
            libs[m.group(1)] = pathlib.Path(path).resolve()
    if not libs:
        pytest.skip("NCCLBIND_SHIM_LIBS names no shim (run under Bazel, or build with shim/build_shim.sh)")
    return libs


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> pathlib.Path:
    """A directory holding the stand-in as libnccl.so.2 and the C program linked to it."""
    directory = tmp_path_factory.mktemp("stand_in")
    fake = os.environ.get("NCCLBIND_FAKE_NCCL")
    if not fake:
        pytest.skip("NCCLBIND_FAKE_NCCL is not set")
    shutil.copy(fake, directory / "libnccl.so.2")
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler for the traced C program")
    subprocess.run([compiler, "-O1", "-o", str(directory / "traced_program"), str(HERE / "traced_program.c"),
                    f"-L{directory}", "-l:libnccl.so.2", f"-Wl,-rpath,{directory}", "-ldl", "-lpthread"], check=True)
    return directory


def python_path() -> str:
    import ncclbind
    return os.pathsep.join([str(pathlib.Path(ncclbind.__file__).parent.parent)] + [p for p in sys.path if p])


def run_preloaded(stand_in, tmp_path, args, mode="full", release=OLDEST, extra=None, check=True):
    """The C program under LD_PRELOAD of one shim variant; (stdout, {trace file: records})."""
    out = tmp_path / "trace"
    env = dict(os.environ, LD_PRELOAD=str(shim_libraries()[release]), NCCLBIND_SHIM_MODE=mode,
               NCCLBIND_SHIM_DIR=str(out), **(extra or {}))
    proc = subprocess.run([str(stand_in / "traced_program"), *args], env=env, capture_output=True, text=True,
                          timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, read_traces(out)


def trace_run(stand_in, tmp_path, command, options=(), check=True, extra=None):
    """python -m ncclbind.trace run ... -- command, with the Bazel-built shims."""
    out = tmp_path / "trace"
    libs = shim_libraries()
    env = dict(os.environ, NCCLBIND_SHIM_LIBDIR=str(next(iter(libs.values())).parent), PYTHONPATH=python_path(),
               **(extra or {}))
    proc = subprocess.run([sys.executable, "-m", "ncclbind.trace", "run", "--nccl", str(stand_in / "libnccl.so.2"),
                           "--out", str(out), *options, "--", *command], env=env, capture_output=True, text=True,
                          timeout=180)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, out


def read_traces(directory: pathlib.Path) -> dict[str, list[dict]]:
    if not directory.exists():
        return {}
    return {f.name: [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            for f in sorted(directory.glob("trace-*.jsonl"))}


def issued(stdout: str) -> dict[str, tuple[int, int]]:
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^issued (\w+) (\d+) (\d+)$", stdout, re.M)}


def calls(records, fn=None, ok=True):
    return [r for r in records if r["type"] == "call" and (fn is None or r["fn"] == fn)
            and (not ok or r.get("rc", 0) == 0)]


def test_every_release_exports_its_functions_and_no_other():
    """Each variant defines a wrapper for exactly the functions the IR gives its release, so
    a program's dlsym gating sees what its libnccl has."""
    libs = shim_libraries()
    assert sorted(libs) == sorted(RELEASES)
    for release, lib in libs.items():
        probe = ("import ctypes,sys,json; l=ctypes.CDLL(sys.argv[1]); "
                 "print(json.dumps([n for n in json.loads(sys.argv[2]) if hasattr(l, n)]))")
        names = [f["name"] for f in API["functions"]]
        proc = subprocess.run([sys.executable, "-c", probe, str(lib), json.dumps(names)], capture_output=True,
                              text=True, check=True)
        expected = sorted(f["name"] for f in API["functions"] if release in f["versions"])
        assert sorted(json.loads(proc.stdout)) == expected, release


def _release_tables(release: str) -> str:
    """The release's tables in the one shim source: the block headed "the tables of NCCL <its
    releases>" that names it (releases whose tables read the same share one block)."""
    source = (ROOT / "bindings" / "shim" / "src" / "nccl_shim.c").read_text()
    blocks = re.findall(r"^/\* the tables of NCCL (.*?) \*/$(.*?)(?=^/\* the tables of NCCL|\Z)", source, re.M | re.S)
    mine = [text for releases, text in blocks if release in releases.split(", ")]
    assert len(mine) == 1, f"NCCL {release} is in {len(mine)} table blocks of nccl_shim.c"
    return mine[0]


def _c_strings(source: str, array: str) -> list[str]:
    body = re.search(rf"{array}\[\] = \{{(.*?)\}};", source, re.S)
    assert body, array
    return re.findall(r'"(\w*)"', body.group(1))


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_names_only_its_own_data_types_ops_and_results(release):
    """A trace names a data type, op or result by the table of the release it wraps: a value that
    release's header lacks (a data type or result code a newer release added) is unnamed, as any
    unknown value, rather than given a newer release's name (or byte size). The names are read from
    the release's own IR (bindings/ir/nccl-<release>.json), not the merged one the renderer reads."""
    source = _release_tables(release)
    ir = json.loads((ROOT / "bindings" / "ir" / f"nccl-{release}.json").read_text())
    for enum, array in (("ncclDataType_t", "nb_shim_dtype_names"), ("ncclRedOp_t", "nb_shim_op_names"),
                        ("ncclResult_t", "nb_shim_result_names")):
        names: dict[int, str] = {}
        for v in next(e for e in ir["enums"] if e["name"] == enum)["values"]:
            if not v.get("sentinel") and not v["name"].startswith("ncclNum") and v["name"] != "ncclMaxRedOp":
                names.setdefault(v["value"], v["name"])
        assert _c_strings(source, array) == [names.get(i, "") for i in range(max(names) + 1)], (release, enum)


def test_trace_holds_what_the_c_program_issued(stand_in, tmp_path):
    stdout, traces = run_preloaded(stand_in, tmp_path, [])
    assert stdout.rstrip().endswith("ok")
    (records,) = traces.values()
    assert records[0]["type"] == "process" and records[0]["shim_release"] == OLDEST
    for fn, (n, size) in issued(stdout).items():
        got = calls(records, fn)
        assert len(got) == n, fn
        if size:
            assert sum(c["bytes"] for c in got) == size, fn
    first = calls(records, "ncclAllReduce")[0]
    assert (first["count"], first["dtype"], first["op"], first["bytes"], first["stream"]) == \
        (8, "ncclFloat32", "ncclSum", 32, "0x1234")
    assert calls(records, "ncclBroadcast")[0]["root"] == 0 and calls(records, "ncclBroadcast")[0]["dtype"] == "ncclInt32"
    send, recv = calls(records, "ncclSend")[0], calls(records, "ncclRecv")[0]
    assert send["peer"] == 0 and send["group"] == 1 and recv["group"] == 1 and send["send"] != "0x0"
    assert recv["send"] == "0x0" and recv["recv"] != "0x0"
    assert calls(records, "ncclGroupEnd")[0]["group"] == 0
    (comm,) = [r for r in records if r["type"] == "comm"]
    assert (comm["rank"], comm["nranks"], comm["by"]) == (0, 1, "ncclCommInitRank")
    assert first["comm"] == comm["comm"]
    assert [r for r in records if r["type"] == "end"][0]["comm"] == comm["comm"]
    counters = {r["fn"]: r for r in records if r["type"] == "counters"}
    assert counters["ncclAllReduce"]["calls"] == issued(stdout)["ncclAllReduce"][0]


@pytest.mark.parametrize("mode", ["full", "counts"])
def test_a_call_libnccl_makes_inside_another_is_not_the_programs(stand_in, tmp_path, mode):
    """The stand-in's ncclBcast calls ncclBroadcast through its exported symbol, as libnccl
    does: the program made one call, so the shim records and counts one."""
    stdout, traces = run_preloaded(stand_in, tmp_path, ["--bcast"], mode=mode)
    assert issued(stdout)["ncclBcast"] == (1, 20) and issued(stdout)["ncclBroadcast"][0] == 1
    (records,) = traces.values()
    counters = {r["fn"]: r for r in records if r["type"] == "counters"}
    for fn, (n, size) in issued(stdout).items():
        assert counters[fn]["calls"] == n, fn
        if size:
            assert counters[fn]["bytes"] == size, fn
        assert len(calls(records, fn)) == (n if mode == "full" else 0), fn
    if mode == "full":
        (bcast,) = calls(records, "ncclBcast")
        (comm,) = [r for r in records if r["type"] == "comm"]
        assert (bcast["count"], bcast["dtype"], bcast["comm"]) == (5, "ncclInt32", comm["comm"])


def test_a_nested_call_under_checkpoint_mode_gets_the_real_handle(stand_in, tmp_path):
    """Checkpoint mode: the program's ncclBcast carries the shim's handle, which its wrapper
    translates; the ncclBroadcast libnccl makes inside it carries the real one and is passed
    through as it is, neither recorded nor counted, before and after a checkpoint."""
    proc, out = trace_run(stand_in, tmp_path, [str(stand_in / "traced_program"), "--bcast", "--checkpoint"],
                          ["--checkpoint"])
    assert "restored 8" in proc.stdout
    (records,) = read_traces(out).values()
    (bcast,) = calls(records, "ncclBcast")
    assert len(calls(records, "ncclBroadcast")) == issued(proc.stdout)["ncclBroadcast"][0] == 1
    assert bcast["comm"] == [r for r in records if r["type"] == "comm"][0]["comm"]
    counters = {r["fn"]: r for r in records if r["type"] == "counters"}
    assert counters["ncclBcast"]["calls"] == 1 and counters["ncclBroadcast"]["calls"] == 1


def test_results_and_errno_pass_through(stand_in, tmp_path):
    stdout, traces = run_preloaded(stand_in, tmp_path, ["--errno"])
    result = API_RESULT("ncclInvalidArgument")
    assert f"failed-call {result} errno kept" in stdout
    (records,) = traces.values()
    (failed,) = [c for c in calls(records, "ncclAllReduce", ok=False) if c["rc"] != 0]
    assert (failed["rc"], failed["result"], failed["dtype"]) == (result, "ncclInvalidArgument", "")
    counters = {r["fn"]: r for r in records if r["type"] == "counters"}
    assert counters["ncclAllReduce"]["errors"] == 1


def API_RESULT(name: str) -> int:
    enum = next(e for e in API["enums"] if e["name"] == "ncclResult_t")
    return next(v["value"] for v in enum["values"] if v["name"] == name)


def test_off_writes_nothing_and_changes_nothing(stand_in, tmp_path):
    plain = subprocess.run([str(stand_in / "traced_program"), "--errno"], capture_output=True, text=True, check=True)
    stdout, traces = run_preloaded(stand_in, tmp_path, ["--errno"], mode="off")
    assert traces == {} and not (tmp_path / "trace").exists()
    assert stdout == plain.stdout


def test_counts_mode_counts_without_per_call_records(stand_in, tmp_path):
    stdout, traces = run_preloaded(stand_in, tmp_path, [], mode="counts")
    (records,) = traces.values()
    assert calls(records) == []
    counters = {r["fn"]: r for r in records if r["type"] == "counters"}
    for fn, (n, size) in issued(stdout).items():
        assert counters[fn]["calls"] == n
        if size:
            assert counters[fn]["bytes"] == size


def test_threads_each_record_every_call(stand_in, tmp_path):
    stdout, traces = run_preloaded(stand_in, tmp_path, ["--threads", "6"], extra={"NCCLBIND_SHIM_BUFFER": "7"})
    (records,) = traces.values()
    got = calls(records, "ncclAllReduce")
    assert len(got) == issued(stdout)["ncclAllReduce"][0] == 61
    assert len({c["tid"] for c in got}) == 7  # the main thread and six more, each its own ring


def test_a_ring_that_fills_keeps_every_record_in_order(stand_in, tmp_path):
    """A thread that records faster than its records can be written (bench_calls' tight loops,
    through a 64-record ring) waits for the background flush: every call is in the trace once,
    in the order made."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    program = tmp_path / "bench_calls"
    subprocess.run([compiler, "-O1", "-o", str(program), str(ROOT / "bench" / "shim" / "bench_calls.c"),
                    f"-L{stand_in}", "-l:libnccl.so.2", f"-Wl,-rpath,{stand_in}", "-ldl"], check=True)
    out = tmp_path / "trace"
    env = dict(os.environ, LD_PRELOAD=str(shim_libraries()[OLDEST]), NCCLBIND_SHIM_MODE="full",
               NCCLBIND_SHIM_DIR=str(out), NCCLBIND_SHIM_BUFFER="64")
    n = 5000  # per batch: a warm-up batch and one timed batch of each call
    subprocess.run([str(program), "--batches", "1", str(n)], env=env, capture_output=True, check=True, timeout=120)
    (records,) = read_traces(out).values()
    made = [r for r in records if r["type"] == "call"]
    assert [r["t"] for r in made] == sorted(r["t"] for r in made)
    kinds = [r["fn"] if r["fn"] != "ncclAllReduce" else ("in place" if r["send"] == r["recv"] else "out of place")
             for r in made if r["fn"] in ("ncclGetVersion", "ncclAllReduce")]
    batch = ["ncclGetVersion"] * n + ["out of place"] * n + ["in place"] * n
    assert kinds == batch * 2
    counters = {r["fn"]: r["calls"] for r in records if r["type"] == "counters"}
    assert counters["ncclAllReduce"] == 4 * n and counters["ncclGetVersion"] == 2 * n


def test_fork_child_writes_its_own_trace(stand_in, tmp_path):
    stdout, traces = run_preloaded(stand_in, tmp_path, ["--fork"])
    child = re.search(r"^child (\d+)$", stdout, re.M).group(1)
    assert len(traces) == 2
    by_pid = {str(t[0]["pid"]): t for t in traces.values()}
    assert len(calls(by_pid[child], "ncclAllReduce")) == 10
    parent = next(t for pid, t in by_pid.items() if pid != child)
    assert len(calls(parent, "ncclAllReduce")) == issued(stdout)["ncclAllReduce"][0]  # the child counts its own


def test_missing_functions_stay_missing():
    """A function first in a later release is not found through the oldest release's shim,
    and is through its own release's."""
    later = next(f for f in API["functions"] if OLDEST not in f["versions"])
    libs = shim_libraries()
    probe = "import ctypes,sys; print(hasattr(ctypes.CDLL(None), sys.argv[1]))"
    for release, expected in ((OLDEST, "False"), (later["since"], "True")):
        env = dict(os.environ, LD_PRELOAD=str(libs[release]))
        out = subprocess.run([sys.executable, "-c", probe, later["name"]], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
        assert out == expected, (release, later["name"])


def test_the_c_program_gates_on_dlsym(stand_in, tmp_path):
    later = next(f for f in API["functions"] if OLDEST not in f["versions"])
    stdout, _ = run_preloaded(stand_in, tmp_path, ["--gated", later["name"]])
    assert stdout.strip() == f"gated {later['name']} absent"


def test_checkpoint_restores_behind_the_same_handles_tcp_store(stand_in, tmp_path):
    proc, out = trace_run(stand_in, tmp_path, [str(stand_in / "traced_program"), "--checkpoint"], ["--checkpoint"])
    assert "restored 8" in proc.stdout
    during = int(re.search(r"during-checkpoint (\d+)", proc.stdout).group(1))
    assert during != 0  # a call between prepare and restore reaches NCCL without a communicator
    (records,) = read_traces(out).values()
    comms = [r for r in records if r["type"] == "comm"]
    assert [c["by"] for c in comms] == ["ncclCommInitRank", "ncclCommSplit"]
    assert comms[1]["parent_key"] == comms[0]["key"]


def test_checkpoint_file_store_and_refusals(stand_in, tmp_path):
    store = tmp_path / "store"
    proc, _ = trace_run(stand_in, tmp_path, [sys.executable, str(HERE / "ctypes_program.py"), "checkpoint"],
                        ["--checkpoint"], extra={"NCCLBIND_SHIM_STORE": f"file:{store}"})
    assert "refused: ncclbind_shim_checkpoint_prepare failed" in proc.stdout and "registration" in proc.stdout
    assert "prepared: 0 live" in proc.stdout and "restored: 1 live" in proc.stdout
    assert proc.stdout.rstrip().endswith("ok")
    assert len(list(store.iterdir())) == 1  # rank 0's fresh unique id


def test_checkpoint_mode_translates_handles_with_the_mode_off(stand_in, tmp_path):
    """Off forwards at once only without checkpoint mode: with it, every wrapper still hands
    libnccl the real communicator (none between prepare and restore), and nothing is written."""
    proc, out = trace_run(stand_in, tmp_path, [str(stand_in / "traced_program"), "--checkpoint"],
                          ["--checkpoint", "--mode", "off"])
    assert "restored 8" in proc.stdout
    assert int(re.search(r"during-checkpoint (\d+)", proc.stdout).group(1)) != 0
    assert read_traces(out) == {}


def test_checkpoint_needs_checkpoint_mode(stand_in, tmp_path):
    proc, _ = trace_run(stand_in, tmp_path, [str(stand_in / "traced_program"), "--checkpoint"], check=False)
    assert proc.returncode == 1 and "checkpoint mode is off" in proc.stderr


def test_python_control_api_under_the_shim(stand_in, tmp_path):
    program = (
        "import ncclbind.shim as shim, ctypes\n"
        "assert shim.loaded() and shim.version() >= 1 and shim.mode() == 'counts'\n"
        "p = ctypes.CDLL(None); v = ctypes.c_int()\n"
        "for _ in range(3): p.ncclGetVersion(ctypes.byref(v))\n"
        "c = shim.counters(); assert c['ncclGetVersion'].calls == 3, c\n"
        "shim.reset_counters(); assert shim.counters() == {}\n"
        "shim.enable('full'); p.ncclGetVersion(ctypes.byref(v)); shim.flush(); print('path', shim.trace_path())\n"
        "try:\n    shim.enable('loud')\nexcept shim.ShimError as e:\n    print('refused', e)\n"
        "shim.disable(); assert shim.mode() == 'off'\n")
    proc, out = trace_run(stand_in, tmp_path, [sys.executable, "-c", program], ["--mode", "counts"])
    path = re.search(r"^path (.+)$", proc.stdout, re.M).group(1)
    assert pathlib.Path(path).parent == out
    assert "refused mode: 'loud'" in proc.stdout
    (records,) = read_traces(out).values()
    assert len(calls(records, "ncclGetVersion")) == 1


def test_ncclbind_runtime_goes_through_the_shim(stand_in, tmp_path):
    program = ("import ncclbind\nuid = ncclbind.get_unique_id()\n"
               "comm = ncclbind.Communicator.init(nranks=1, rank=0, unique_id=uid)\n"
               "print('rank', comm.rank)\ncomm.destroy()\n")
    proc, out = trace_run(stand_in, tmp_path, [sys.executable, "-c", program])
    assert "rank 0" in proc.stdout
    (records,) = read_traces(out).values()
    assert len(calls(records, "ncclCommInitRank")) == 1 and len(calls(records, "ncclCommDestroy")) == 1


def test_not_preloaded_error_names_the_preload_line():
    import ncclbind.shim as shim
    assert not shim.loaded()
    with pytest.raises(shim.ShimNotPreloadedError) as raised:
        shim.counters()
    assert "LD_PRELOAD=" in str(raised.value) and "ncclbind.trace run" in str(raised.value)
    assert shim.NCCLCheckpointPreloadError is shim.ShimNotPreloadedError
    assert shim.NCCLCheckpointError is shim.ShimError and issubclass(shim.ShimNotPreloadedError, shim.ShimError)
    with pytest.raises(shim.NCCLCheckpointPreloadError):
        shim.checkpoint_prepare()


def run_rank(stand_in, tmp_path, rank, extra_args):
    return trace_run(stand_in, tmp_path, [sys.executable, str(HERE / "ctypes_program.py"), "collectives", "3",
                                          "--nranks", "2", "--rank", str(rank), *extra_args],
                     extra={"RANK": str(rank)})


def summarize(directory) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=python_path())
    return subprocess.run([sys.executable, "-m", "ncclbind.trace", "summarize", str(directory),
                           "--fail-on-divergence"], env=env, capture_output=True, text=True, timeout=120)


def test_summarize_agreeing_ranks(stand_in, tmp_path):
    for rank in (0, 1):
        _, out = run_rank(stand_in, tmp_path, rank, [])
    result = summarize(out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no divergence" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if "ncclAllReduce" in line]
    assert [(r[0], r[2]) for r in rows] == [("0", "3"), ("1", "3")]
    if "no timeline: matplotlib" not in result.stdout:
        assert (out / "timeline.png").stat().st_size > 0


def test_summarize_names_the_first_divergent_call(stand_in, tmp_path):
    _, out = run_rank(stand_in, tmp_path, 0, [])
    run_rank(stand_in, tmp_path, 1, ["--then-broadcast"])
    result = summarize(out)
    assert result.returncode == 3
    line = next(line for line in result.stdout.splitlines() if line.startswith("DIVERGENCE"))
    assert "collective #4" in line and "rank 0: no call" in line and "rank 1: ncclBroadcast(count=4" in line


def test_trace_run_builds_the_shim_from_the_sources(stand_in, tmp_path):
    """Without prebuilt shims, `ncclbind.trace library` builds the variant of the stand-in's
    release once with the system compiler (shim/build_shim.sh) and reuses it."""
    env = dict(os.environ, PYTHONPATH=python_path(), NCCLBIND_SOURCE_DIR=str(ROOT),
               NCCLBIND_SHIM_CACHE=str(tmp_path / "cache"))
    env.pop("NCCLBIND_SHIM_LIBDIR", None)
    command = [sys.executable, "-m", "ncclbind.trace", "library", "--nccl", str(stand_in / "libnccl.so.2")]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    library = pathlib.Path(first.stdout.strip())
    claimed = ctypes.c_int()
    ctypes.CDLL(str(stand_in / "libnccl.so.2")).ncclGetVersion(ctypes.byref(claimed))
    release = max((v for v, code in API["version_codes"].items() if code <= claimed.value), key=API["version_codes"].get)
    assert library.name == f"libncclbind_shim-nccl-{release}.so" and library.is_file()  # the stand-in's release
    stamp = library.stat().st_mtime_ns
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.stdout == first.stdout and library.stat().st_mtime_ns == stamp
    counted = collections.Counter()
    stdout, traces = run_preloaded_with(stand_in, tmp_path, library)
    for records in traces.values():
        counted.update(c["fn"] for c in calls(records))
    assert counted["ncclAllReduce"] == issued(stdout)["ncclAllReduce"][0]


def run_preloaded_with(stand_in, tmp_path, library):
    out = tmp_path / "built"
    env = dict(os.environ, LD_PRELOAD=str(library), NCCLBIND_SHIM_MODE="full", NCCLBIND_SHIM_DIR=str(out))
    proc = subprocess.run([str(stand_in / "traced_program")], env=env, capture_output=True, text=True, check=True)
    return proc.stdout, read_traces(out)


def test_gpu_time_through_cuda_events(stand_in, tmp_path):
    """NCCLBIND_SHIM_GPU_TIME: CUDA events around every collective (here a stand-in driver
    that stamps host time), read back into gpu_ms, and summarize's GPU time and bus bandwidth."""
    driver = tmp_path / "driver"
    driver.mkdir()
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    subprocess.run([compiler, "-shared", "-fPIC", "-fvisibility=hidden", "-o", str(driver / "libcuda.so.1"),
                    str(HERE / "fake_cuda.c")], check=True)
    extra = {"NCCLBIND_SHIM_GPU_TIME": "1", "LD_LIBRARY_PATH": str(driver)}
    stdout, traces = run_preloaded(stand_in, tmp_path, [], extra=extra)
    (records,) = traces.values()
    timed = [c for c in calls(records) if "gpu_ms" in c]
    assert {c["fn"] for c in timed} == {"ncclAllReduce", "ncclBroadcast", "ncclSend", "ncclRecv"}
    assert all(c["gpu_ms"] >= 0 for c in timed)
    assert not [c for c in calls(records, "ncclGetVersion") if "gpu_ms" in c]
    result = summarize(tmp_path / "trace")
    row = next(line.split() for line in result.stdout.splitlines() if " ncclAllReduce " in line)
    assert row[-2] != "-" and row[-1] != "-", result.stdout  # GPU ms and busbw


def test_gpu_time_without_a_driver_is_a_shim_error(stand_in, tmp_path):
    program = ("import ncclbind.shim as shim\ntry:\n    shim.set_gpu_timing(True)\n"
               "except shim.ShimError as e:\n    print('refused', e.result, e)\nelse:\n    print('accepted')\n")
    proc, _ = trace_run(stand_in, tmp_path, [sys.executable, "-c", program], extra={"LD_LIBRARY_PATH": str(tmp_path)})
    import ctypes.util
    if ctypes.util.find_library("cuda"):
        pytest.skip("this machine has a libcuda: the refusal cannot be shown")
    assert "refused -3" in proc.stdout and "libcuda.so.1" in proc.stdout


def test_a_call_that_hangs_is_written_as_pending(stand_in, tmp_path):
    """A call still inside NCCL after NCCLBIND_SHIM_PENDING_MS is in the trace even if the
    process is then killed; summarize says which rank hangs in which call."""
    proc, out = trace_run(stand_in, tmp_path, [sys.executable, str(HERE / "ctypes_program.py"), "hang", "60"],
                          ["--timeout", "3"], check=False, extra={"NCCLBIND_SHIM_PENDING_MS": "300"})
    assert proc.returncode == 124, proc.stderr
    (records,) = read_traces(out).values()
    (pending,) = [c for c in records if c.get("pending")]
    assert (pending["fn"], pending["count"], pending["dtype"]) == ("ncclAllReduce", 4, "ncclFloat32")
    result = summarize(out)
    assert "still inside ncclAllReduce(count=4, ncclFloat32, ncclSum)" in result.stdout, result.stdout


def test_a_pending_call_that_returns_is_one_call(stand_in, tmp_path):
    proc, out = trace_run(stand_in, tmp_path, [sys.executable, str(HERE / "ctypes_program.py"), "hang", "1",
                                               "--abort"], extra={"NCCLBIND_SHIM_PENDING_MS": "300"})
    assert "aborted" in proc.stdout
    (records,) = read_traces(out).values()
    assert len([c for c in records if c.get("pending")]) == 1
    from ncclbind.trace.summary import load_traces
    (process,) = load_traces(out)
    (call,) = [c for c in process.calls if c["fn"] == "ncclAllReduce"]
    assert not call.get("pending") and call["dur_ns"] > 300_000_000


def test_the_benchmark_runs_over_the_stand_in():
    """bench/shim/run.sh prints, per call, a row per mode over its rounds, and judges the goals on
    the trivial call and the in-place all-reduce (no figure is asserted: speed goals are the
    benchmark's)."""
    proc = subprocess.run(["bash", str(ROOT / "bench" / "shim" / "run.sh"), "2000", "2"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "median of 2 rounds" in lines[0], proc.stdout
    for call in ("get_version", "all_reduce_in_place", "all_reduce"):
        start = next(i for i, line in enumerate(lines) if line.split()[:1] == [call])
        rows = [line.split()[0] for line in lines[start + 2:start + 6]]
        assert rows == ["no", "off", "counts", "full"], proc.stdout
    verdicts = [line for line in lines if "added per call" in line]
    assert [v.split(":")[0] for v in verdicts] == ["off", "counts", "full"], proc.stdout
    assert all("(get_version)" in v and "(all_reduce_in_place)" in v for v in verdicts), proc.stdout
    assert "goal < 5 ns" in verdicts[0] and "goal < 400 ns" in verdicts[2]


def test_summarize_names_each_damaged_record_and_goes_on(tmp_path):
    """Damaged traces (a cut line, a record of the wrong shape, a FIFO named like a trace) are
    skipped and named with file and line; --strict stops at the first with exit 2; a missing
    folder is one line, exit 2. Nothing hangs, nothing raises from inside the package."""
    from ncclbind.trace import TraceError, summarize
    good = [{"type": "process", "pid": 1, "rank_env": "0"},
            {"type": "comm", "comm": 7, "t": 1, "nranks": 1, "rank": 0, "key": "k"},
            {"type": "call", "fn": "ncclAllReduce", "t": 2, "tid": 1, "comm": 7, "count": 4, "bytes": 16}]
    lines = [json.dumps(good[0]), "[1]", json.dumps({"type": "call", "t": 3, "tid": 1}), '{"type": "call", "fn"',
             json.dumps({"type": "comm", "comm": 8, "t": 1, "nranks": 0, "rank": 0, "key": "x"}),
             json.dumps({"type": "call", "fn": "ncclAllReduce", "t": 4, "tid": 1, "count": "4"}),
             json.dumps({"type": "telemetry"}), json.dumps(good[1]), json.dumps(good[2]),
             # a type that is no string (unhashable: it raised TypeError), text no output can print
             json.dumps({"type": ["call"]}), '{"type": "call", "fn": "\\ud800", "t": 5, "tid": 1}']
    (tmp_path / "trace-a-1.jsonl").write_text("\n".join(lines) + "\n")
    os.mkfifo(tmp_path / "trace-b-2.jsonl")
    out = io.StringIO()
    summary = summarize(tmp_path, png=str(tmp_path / "t.png"), out=out)
    assert summary.problems == [
        "trace-a-1.jsonl:2: not a JSON object (list)",
        "trace-a-1.jsonl:3: a call record without 'fn'",
        "trace-a-1.jsonl:4: not JSON (a line cut short by a kill?)",
        "trace-a-1.jsonl:5: comm record: nranks is 0",
        "trace-a-1.jsonl:6: call record: count is '4'",
        "trace-a-1.jsonl:7: unknown record type 'telemetry'",
        "trace-a-1.jsonl:10: unknown record type ['call']",
        "trace-a-1.jsonl:11: call record: fn is not valid Unicode text ('\\ud800')",
        "trace-b-2.jsonl: not a regular file, not read",
    ]
    assert [(r["fn"], r["calls"]) for r in summary.rows] == [("ncclAllReduce", 1)]
    assert "9 damaged record(s) skipped" in out.getvalue()
    with pytest.raises(TraceError, match=r"^trace-a-1.jsonl:2: not a JSON object"):
        summarize(tmp_path, png=str(tmp_path / "t.png"), out=io.StringIO(), strict=True)
    for argv, message in ((["--strict", str(tmp_path)], "trace-a-1.jsonl:2: not a JSON object (list)"),
                          ([str(tmp_path / "absent")], "absent: not a folder of traces"),
                          ([], "the following arguments are required: directory")):
        run = subprocess.run([sys.executable, "-m", "ncclbind.trace", "summarize", *argv], capture_output=True,
                             text=True, timeout=120, env=dict(os.environ, PYTHONPATH=python_path()))
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and message in run.stderr, run.stderr
