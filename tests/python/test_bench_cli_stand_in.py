"""`python -m ncclbind.bench` end to end on a CPU, over the stand-in libnccl (fake_nccl.c moves
the data of one-rank communicators in host memory): the driver starts the Python worker and
the C worker (bench/cli/c, built by Bazel or here with the C compiler) and, where one is built,
the Rust worker; they create their communicators, fill, time and check every collective; the
driver prints nccl-tests' tables, which a parser written like the ones people use reads back,
and writes the JSON and the PNG. --host-memory labels every table: no figure here is a GPU
figure, and none is asserted. A worker that fails or finds wrong data fails the run."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from stand_ins import build_stand_in

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALL = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,send_recv"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    return os.path.abspath(os.environ.get("NCCLBIND_FAKE_NCCL") or build_stand_in(tmp_path_factory.mktemp("nccl")))


@pytest.fixture(scope="module")
def c_worker(tmp_path_factory):
    given = os.environ.get("NCCLBIND_BENCH_C_WORKER")
    if given:
        return os.path.abspath(given)
    out = tmp_path_factory.mktemp("cworker")
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    assert compiler, "no C compiler to build the C worker (or set NCCLBIND_BENCH_C_WORKER)"
    subprocess.run([compiler, "-std=c11", "-O1", f"-I{ROOT}/runtime/include", f"-I{ROOT}/bindings/c/include",
                    str(ROOT / "bench/cli/c/bench_worker.c"), str(ROOT / "bindings/c/src/nccl.c"),
                    *map(str, sorted((ROOT / "runtime/src").glob("*.c"))), "-ldl", "-lpthread", "-lm",
                    "-o", str(out / "worker")], check=True)
    return str(out / "worker")


def bench(stand_in, *argv, cwd=None):
    env = dict(os.environ, NCCLBIND_NCCL_PATH=stand_in, CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("NCCLBIND_BENCH_RUST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "ncclbind.bench", "--host-memory", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=240)


def parse_tables(text):
    """Like the nccl-tests parsers in use: every non-comment line of 13 fields is a row; the
    table's own comment line says whose it is."""
    tables, current = {}, None
    for line in text.splitlines():
        if line.startswith("# ncclbind.bench: "):
            perf, backend = line.split(": ")[1].split(", backend ")
            current = tables.setdefault((backend, perf), [])
        elif line and not line.startswith("#") and current is not None:
            f = line.split()
            assert len(f) == 13, line
            current.append({"size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3], "root": int(f[4]),
                            "oop": (float(f[5]), float(f[6]), float(f[7]), f[8]),
                            "ip": (float(f[9]), float(f[10]), float(f[11]), f[12])})
    return tables


def test_every_collective_through_the_python_and_c_workers(stand_in, c_worker, tmp_path):
    result = bench(stand_in, "-b", "8", "-e", "1M", "-f", "4", "-c", "2", "-n", "3", "-w", "1",
                   "--collectives", ALL, "--backends", "ncclbind,c,torch,cupy,nccl4py", "--c-worker", c_worker,
                   "--latency-iters", "40", "--latency-rounds", "3",
                   "-J", str(tmp_path / "out.json"), "--plot", str(tmp_path / "out.png"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    tables = parse_tables(result.stdout)
    perf = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf", "reduce_scatter": "reduce_scatter_perf",
            "broadcast": "broadcast_perf", "reduce": "reduce_perf", "all_to_all": "alltoall_perf",
            "send_recv": "sendrecv_perf"}
    sizes = [8 * 4 ** k for k in range(9) if 8 * 4 ** k <= 1 << 20]
    for backend in ("ncclbind", "c"):
        for name in ALL.split(","):
            rows = tables[(backend, perf[name])]
            assert [r["size"] for r in rows] == sizes, (backend, name)
            assert all(r["count"] == r["size"] // 4 for r in rows)
            assert all(r["oop"][3] == "0" for r in rows)  # checked, nothing wrong
            in_place = {r["ip"][3] for r in rows}
            assert in_place == ({"N/A"} if name in ("all_to_all", "send_recv") else {"0"})
            assert all(r["redop"] == ("sum" if name in ("all_reduce", "reduce_scatter", "reduce") else "none")
                       for r in rows)
    assert "host memory (a stand-in libnccl on a CPU machine): these are not GPU figures" in result.stdout
    for name in ("torch", "cupy", "nccl4py"):  # reported, not dropped
        assert f"# backend {name} unavailable: --host-memory: this backend needs GPU memory" in result.stdout
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["backends"]["ncclbind"]["status"] == "ran" and document["backends"]["c"]["status"] == "ran"
    assert document["backends"]["torch"]["status"] == "unavailable"
    assert len(document["results"]) == 2 * 7 * len(sizes) * 2
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG"
    # the latency pass: the Python backends that can run here (ncclbind alone, on host memory) at
    # the sweep's sizes up to 1 KiB, every call of ncclbind's warm-up batch (the timed calls' objects,
    # observed) made by the C fast path
    small = [s for s in sizes if s <= 1024]
    assert document["latency_pass"]["status"] == "ran"
    latency = document["latency"]
    want = sorted((name, size) for name in ALL.split(",") for size in small)
    assert sorted((r["collective"], r["size"]) for r in latency) == want
    assert {r["backend"] for r in latency} == {"ncclbind"} and all(len(r["rounds"]) == 3 for r in latency)
    from ncclbind.bench.worker import latency_batches
    per = latency_batches(40)[1]  # one warm-up batch
    assert all(r["fast_path"] == [per * (2 if r["collective"] == "send_recv" else 1), 0] for r in latency), latency
    text = result.stdout[result.stdout.index("# ==== latency at small sizes"):]
    assert all(line.startswith("#") for line in text[:text.index("# ==== summary")].splitlines() if line)
    for name in ALL.split(","):
        assert f"# goal not judged: {name} ncclbind small-message latency: the latency pass: it ran without " \
               "ncclbind or without another Python backend" in result.stdout


@pytest.mark.parametrize("dtype, op", [("int8", "prod"), ("double", "avg"), ("uint8", "max"), ("int64", "min")])
def test_types_and_ops_check_clean(stand_in, c_worker, dtype, op):
    result = bench(stand_in, "-b", "64", "-e", "4K", "-f", "8", "-d", dtype, "-o", op, "-R", "1", "-n", "2",
                   "--collectives", "all_reduce,reduce_scatter,reduce", "--backends", "ncclbind,c",
                   "--c-worker", c_worker)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("# Out of bounds values : 0 OK") == 6
    assert "-R 1: buffers from ncclMemAlloc, registered with ncclCommRegister" in result.stdout


def test_without_the_latency_pass_the_latency_goal_is_not_judged(stand_in, c_worker):
    result = bench(stand_in, "-b", "8", "-e", "64", "-f", "8", "-n", "2", "--backends", "ncclbind,c",
                   "--c-worker", c_worker, "--latency-max", "0")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "latency at small sizes" not in result.stdout
    assert "# goal not judged: all_reduce ncclbind small-message latency: the latency pass: --latency-max 0" \
        in result.stdout


def test_latency_worker_runs_its_backends_in_one_process_and_skips_what_cannot_run(stand_in, tmp_path):
    # nccl4py needs torch, which this machine lacks: skipped before it joins a communicator, and
    # ncclbind still measured (the driver itself passes only backends it found installed)
    env = dict(os.environ, NCCLBIND_NCCL_PATH=stand_in, CUDA_VISIBLE_DEVICES="", NCCLBIND_CUDA_BACKEND="helper",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-m", "ncclbind.bench.worker", "--backend", "ncclbind,nccl4py",
                             "--rank", "0", "--nranks", "1", "--device", "0",
                             "--uid-file", str(tmp_path / "latency.uid"),
                             "--collectives", "all_reduce,send_recv", "--sizes", "8,64", "--iters", "30,30",
                             "--warmups", "1,1", "--dtype", "float", "--op", "sum", "--root", "0", "--check", "1",
                             "--blocking", "0", "--register", "0", "--host-memory", "--latency-rounds", "2"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["event"] == "skipped" and events[0]["backend"] == "nccl4py" and events[0]["collective"] is None
    assert "ImportError" in events[0]["reason"] or "ModuleNotFoundError" in events[0]["reason"]
    assert events[1]["event"] == "ready" and events[-1] == {"event": "done"}
    latency = [e for e in events if e["event"] == "latency"]
    assert [(e["backend"], e["collective"], e["size"]) for e in latency] == [
        ("ncclbind", c, s) for c in ("all_reduce", "send_recv") for s in (8, 64)]
    assert all(len(e["rounds"]) == 2 and e["iters"] == 30 and e["batch"] == 3 and e["fast_path"][1] == 0
               for e in latency)


def fake_worker(tmp_path, wrong="0", exit_code=0):
    """A worker that speaks the protocol and reports what it is told to."""
    script = tmp_path / "worker.py"
    script.write_text(f"""import json, sys
args = sys.argv[1:]
get = lambda k: args[args.index("--" + k) + 1]
print(json.dumps({{"event": "ready", "rank": int(get("rank")), "notes": []}}))
for name in get("collectives").split(","):
    for size in map(int, get("sizes").split(",")):
        for in_place in (0, 1):
            print(json.dumps({{"event": "result", "collective": name, "size": size, "count": size // 4,
                              "in_place": in_place, "time_us": 2.0, "wrong": {wrong}, "iters": 1}}))
print(json.dumps({{"event": "done"}}))
sys.exit({exit_code})
""")
    launcher = tmp_path / "worker"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    launcher.chmod(0o755)
    return str(launcher)


def test_wrong_data_fails_the_run(stand_in, tmp_path):
    result = bench(stand_in, "-b", "64", "-e", "64", "--backends", "c", "--c-worker", fake_worker(tmp_path, "3"))
    assert result.returncode == 1
    # nccl-tests counts each out-of-place or in-place measurement that found wrong elements
    assert "# Out of bounds values : 2 FAILED" in result.stdout and "6 wrong elements: FAILED" in result.stderr
    assert "# FAILED: 6 wrong elements in 2 measurements: c all_reduce 64 B out of place (3), c all_reduce 64 B " \
        "in place (3)" in result.stdout
    [row] = [line.split() for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert row[8] == row[12] == "3"


def test_a_failing_worker_fails_the_run_with_its_message(stand_in, tmp_path):
    result = bench(stand_in, "-b", "64", "-e", "64", "--backends", "c", "--c-worker",
                   fake_worker(tmp_path, exit_code=7))
    assert result.returncode == 1
    assert "backend c FAILED: rank 0 exited with status 7" in result.stderr


def test_every_collective_through_the_rust_worker(stand_in, tmp_path):
    """The Rust worker: Bazel's (//bench/cli:ncclbind_bench_worker_rust, NCCLBIND_BENCH_RUST_WORKER),
    which must then exist; without Bazel the one bench/cli/rust/build.sh puts in
    bindings/rust/target/gpu/, skipped, saying so, when it is not built."""
    given = os.environ.get("NCCLBIND_BENCH_RUST_WORKER")
    worker = pathlib.Path(given).resolve() if given else ROOT / "bindings" / "rust" / "target" / "gpu" / "ncclbind_bench_worker"
    if not given and not worker.exists():
        pytest.skip(f"{worker} is not built (bash bench/cli/rust/build.sh)")
    assert worker.is_file(), f"NCCLBIND_BENCH_RUST_WORKER={given}: no such file"
    result = bench(stand_in, "-b", "8", "-e", "64K", "-f", "8", "-c", "2", "--collectives", ALL, "-d", "half",
                   "--backends", "rust", "--rust-worker", str(worker))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("# Out of bounds values : 0 OK") == 7


# The checkout as this test's files are laid out (under Bazel the runfiles tree, which holds the C
# worker's sources through the target's data), not resolved into the source tree.
SOURCES = pathlib.Path(os.path.abspath(__file__)).parents[2]


def test_without_a_c_worker_the_bench_builds_one_from_the_checkout(tmp_path, monkeypatch):
    """No --c-worker and no NCCLBIND_BENCH_C_WORKER, in a checkout with a C compiler: the bench
    builds the C worker from the checkout's sources (bench/cli/c/build.sh) into its cache, once per
    version of the sources, and runs it; without a compiler it says which one it lacks."""
    from types import SimpleNamespace

    from ncclbind.bench import driver
    monkeypatch.setenv("NCCLBIND_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NCCLBIND_BENCH_C_WORKER", raising=False)
    monkeypatch.chdir(SOURCES)
    command, reason = driver.availability("c", SimpleNamespace(c_worker=None, host_memory=True))
    assert reason == "" and command is not None, reason
    path = command[0]
    assert os.access(path, os.X_OK) and pathlib.Path(path).is_relative_to(tmp_path / "cache")
    assert driver.build_c_worker(SOURCES) == (path, "")  # the same sources: the cached binary
    done = subprocess.run([path, "--dtype", "e4m3"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "--dtype: e4m3" in done.stderr  # vocabulary.toml's nccl-tests names only
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setenv("NCCLBIND_BENCH_CACHE", str(tmp_path / "other"))
    assert driver.build_c_worker(SOURCES) == (None, "no C worker binary, and no C compiler to build it "
                                                    "(no-such-cc; set CC)")
