"""ncclbind.bench's pieces on a CPU (no NCCL call): nccl-tests' flags and size sweeps, the
collectives' layouts and bus factors, the data every rank sends and expects against an
independent NumPy model of each collective, the aggregation over ranks (-a), nccl-tests'
table column for column, the JSON round trip, the PNG, the progress bar, and which backends
are reported unavailable and why. The end-to-end runs over the stand-in libnccl are in
test_bench_cli_stand_in.py."""
from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest

from ncclbind.bench import BenchConfig, BenchConfigError, BenchResult, parse_args
from ncclbind.bench.collectives import COLLECTIVES, bandwidths, expected_values, send_values
from ncclbind.bench.config import DTYPES, OPS
from ncclbind.bench.driver import availability, launched_rank
from ncclbind.bench.progress import Progress
from ncclbind.bench.python_backends import ArrayOps
from ncclbind.bench.results import aggregate, aggregate_latency, read_json, read_latency, write_json
from ncclbind.bench.table import format_time, latency_table, row_line, summary, table

K, M, G = 1 << 10, 1 << 20, 1 << 30


# ---- flags, as nccl-tests reads them ------------------------------------------------------------

def test_defaults_are_nccl_tests_defaults():
    c = parse_args([])
    assert (c.min_bytes, c.max_bytes, c.step_bytes, c.step_factor) == (32 * M, 32 * M, 1 * M, 1)
    assert (c.iters, c.warmup_iters, c.check, c.average, c.blocking, c.register) == (20, 5, 1, 1, 0, 0)
    assert (c.dtype, c.op, c.root, c.ngpus, c.nthreads) == ("float", "sum", 0, 1, 1)
    assert c.sizes() == [32 * M]


def test_step_factor_multiplies_up_to_maxbytes():
    assert parse_args(["-b", "8", "-e", "128M", "-f", "2"]).sizes() == [8 << k for k in range(25)]
    assert parse_args(["-b", "8", "-e", "100", "-f", "3"]).sizes() == [8, 24, 72]


def test_step_bytes_adds_when_no_factor():
    assert parse_args(["-b", "1M", "-e", "4M", "-i", "1M"]).sizes() == [M, 2 * M, 3 * M, 4 * M]
    assert parse_args(["-b", "1K", "-e", "2500", "-i", "1000"]).sizes() == [1024, 2024]
    # -f wins over -i, as in nccl-tests
    assert parse_args(["-b", "1K", "-e", "4K", "-i", "1", "-f", "2"]).sizes() == [K, 2 * K, 4 * K]


def test_sizes_take_k_m_g_suffixes_and_fractions():
    c = parse_args(["-b", "1.5K", "-e", "1G", "-f", "1024"])
    assert c.sizes() == [1536, 1536 * 1024]
    assert parse_args(["-b", "8", "-e", "2g"]).max_bytes == 2 * G


@pytest.mark.parametrize("argv, flag", [
    (["-b", "8X"], "-b"), (["-e", "lots"], "-e"), (["-b", "1M", "-e", "8"], "-b/-e"), (["-d", "fp7"], "-d"),
    (["-o", "xor"], "-o"), (["-a", "5"], "-a"), (["-R", "3"], "-R"), (["-z", "2"], "-z"), (["-n", "0"], "-n"),
    (["-f", "0"], "-f"), (["--collectives", "all_reduce,alltoallv"], "--collectives"),
    (["--backends", "mpi"], "--backends"), (["-d", "all"], "-d/-o"),
    (["-b", "1M", "-e", "2M", "-i", "0"], "-i"),
    (["--latency-iters", "0"], "--latency-iters"), (["--latency-rounds", "0"], "--latency-rounds"),
    (["--latency-max", "-1"], "--latency-max"),
    # bounded before any work: no size above 1 TiB, no sweep of millions of sizes, no infinity
    (["-b", "1e400"], "-b"), (["-e", "2048G"], "-e"), (["-i", "nan"], "-i"),
    (["-b", "1", "-e", "1G", "-i", "1"], "-b/-e/-i/-f"),
    (["-J", "/nonexistent-folder/out.json"], "-J"), (["--plot", "/"], "--plot"),
])
def test_bad_flags_are_refused_naming_the_flag(argv, flag):
    with pytest.raises(BenchConfigError) as e:
        parse_args(argv)
    assert str(e.value).startswith(flag), str(e.value)


@pytest.mark.parametrize("argv", [["-w", "x"], ["-g", "1e400"], ["--progress", "sometimes"], ["--no-such-flag"],
                                  ["-T", "inf"]])
def test_a_bad_command_line_is_one_line_and_status_2(argv, capsys):
    """argparse's own refusals (a type or choice it checks, an unknown flag) printed the usage
    block and then two error lines; every bad flag is one line now, naming the flag."""
    from ncclbind.bench.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ncclbind-bench: ") and argv[0] in err, err


def test_datatype_aliases_and_names():
    assert parse_args(["-d", "float32"]).dtype == "float"
    assert parse_args(["-d", "fp16"]).dtype == "half"
    assert parse_args(["-d", "bfloat16"]).element_size == 2
    assert [DTYPES[d][0] for d in DTYPES] == list(range(10))  # ncclDataType_t order


def test_latency_pass_takes_the_sweeps_small_sizes():
    c = parse_args(["-b", "8", "-e", "1G", "-f", "2"])
    assert (c.latency_max, c.latency_iters, c.latency_rounds) == (1 * K, 1000, 10)
    assert c.latency_sizes() == [8 << k for k in range(8)]  # 8 B .. 1 KiB
    c = parse_args(["-b", "32", "-e", "64K", "-f", "4", "--latency-max", "4K", "--latency-rounds", "3"])
    assert c.latency_sizes() == [32, 128, 512, 2048] and c.latency_rounds == 3
    assert parse_args(["-b", "0", "-e", "4K", "-i", "512"]).latency_sizes() == [512, 1024]  # 0 B is no message
    assert parse_args(["-b", "8", "-e", "1K", "-f", "2", "--latency-max", "0"]).latency_sizes() == []
    assert parse_args([]).latency_sizes() == []  # nccl-tests' default sweep: 32M only


def test_iteration_cap_bounds_bytes_times_iterations():
    c = parse_args(["-n", "200", "-w", "20", "--iter-bytes-cap", "8G", "-b", "8", "-e", "1G", "-f", "2"])
    assert c.iterations(8) == 200 and c.iterations(1 * G) == 8 and c.iterations(512 * M) == 16
    assert c.warmups(1 * G) == 8 and c.warmups(8) == 20
    assert parse_args(["-n", "7"]).iterations(1 * G) == 7  # no cap: -n everywhere


# ---- layouts, bus factors, bandwidths ------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_bus_factors(n):
    factors = {name: c.bus_factor(n) for name, c in COLLECTIVES.items()}
    assert factors["all_reduce"] == pytest.approx(2 * (n - 1) / n)
    for name in ("all_gather", "reduce_scatter", "all_to_all"):
        assert factors[name] == pytest.approx((n - 1) / n)
    for name in ("broadcast", "reduce", "send_recv"):
        assert factors[name] == 1.0


def test_layouts_as_nccl_tests():
    n, es = 4, 4
    ag = COLLECTIVES["all_gather"].layout(1 * M, es, n)
    assert (ag.count, ag.send, ag.recv, ag.send_in_place, ag.recv_in_place) == (M // 16, M // 16, M // 4, M // 16, 0)
    rs = COLLECTIVES["reduce_scatter"].layout(1 * M, es, n)
    assert (rs.count, rs.send, rs.recv, rs.send_in_place, rs.recv_in_place) == (M // 16, M // 4, M // 16, 0, M // 16)
    a2a = COLLECTIVES["all_to_all"].layout(1 * M, es, n)
    assert (a2a.count, a2a.send, a2a.recv) == (M // 16, M // 4, M // 4)
    ar = COLLECTIVES["all_reduce"].layout(1 * M, es, n)
    assert (ar.count, ar.send, ar.recv) == (M // 4, M // 4, M // 4)
    for c in COLLECTIVES.values():  # the size column: what a rank sends or receives, at most
        assert c.table_bytes(c.layout(1 * M, es, n), es) == 1 * M
    assert COLLECTIVES["all_gather"].layout(12, 4, 4).count == 0  # too small to split: skipped


def test_bandwidths():
    algbw, busbw = bandwidths(COLLECTIVES["all_reduce"], 1_000_000, 10.0, 4)
    assert algbw == pytest.approx(100.0) and busbw == pytest.approx(150.0)
    assert bandwidths(COLLECTIVES["send_recv"], 1000, 0.0, 2) == (0.0, 0.0)


# ---- the data: the worker's expectations against a model of each collective ----------------------

def model(name, sends, n, per, op, root):
    """What every rank receives, computed from every rank's send buffer as NCCL defines it."""
    stack = np.stack(sends).astype("float64")

    def reduce(a):
        return {"sum": a.sum(0), "prod": a.prod(0), "max": a.max(0), "min": a.min(0), "avg": a.sum(0) / n}[op]
    out = []
    for r in range(n):
        if name == "all_reduce":
            out.append(reduce(stack))
        elif name == "reduce":
            out.append(reduce(stack) if r == root else None)
        elif name == "broadcast":
            out.append(stack[root])
        elif name == "all_gather":
            out.append(stack.reshape(-1))
        elif name == "reduce_scatter":
            out.append(reduce(stack)[r * per:(r + 1) * per])
        elif name == "all_to_all":
            out.append(np.concatenate([stack[j][r * per:(r + 1) * per] for j in range(n)]))
        elif name == "send_recv":
            out.append(stack[(r - 1) % n])
    return out


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_expected_values_match_a_model_of_the_collective(name, op, n):
    layout = COLLECTIVES[name].layout(4 * 6 * n, 4, n)
    arange = lambda k: np.arange(k, dtype="int64")  # noqa: E731
    for rep in (0, 1, 7):
        sends = [send_values(arange, name, layout, r, n, rep, op) for r in range(n)]
        assert all(len(s) == layout.send for s in sends)
        assert min(int(s.min()) for s in sends) >= 1  # so that a zeroed (poisoned) element shows
        root = n - 1
        for r, want in enumerate(model(name, sends, n, layout.count, op, root)):
            got = expected_values(arange, name, layout, r, n, rep, op, root)
            if want is None:
                assert got is None
            else:
                np.testing.assert_allclose(np.asarray(got, dtype="float64"), want, rtol=0, atol=0)


def test_a_wrong_element_is_counted():
    ops = ArrayOps("numpy", "float", 0)
    buf = ops.empty(16)
    want = np.arange(1, 17, dtype="float64")
    ops.store(buf, want)
    assert ops.count_wrong(buf, want, (0.0, 0.0)) == 0
    buf.array[3] = 0
    buf.array[9] = np.nan
    assert ops.count_wrong(buf, want, (0.0, 0.0)) == 2


class QueuedOps(ArrayOps):
    """Host buffers whose fills behave as torch's and CuPy's do on a GPU: queued on the library's
    current stream and done only when waited for (finish) or read back (count_wrong ends in
    .item()/int(), which waits for that stream)."""

    def __init__(self):
        super().__init__("numpy", "float", 0)
        self.queue = []

    def store(self, buf, values):
        self.queue.append(lambda: ArrayOps.store(self, buf, values))

    def poison(self, buf):
        self.queue.append(lambda: ArrayOps.poison(self, buf))

    def finish(self):
        while self.queue:
            self.queue.pop(0)()

    def count_wrong(self, buf, want, tolerance):
        self.finish()
        return super().count_wrong(buf, want, tolerance)


class OtherStreamBackend:
    """One rank whose collective runs at once, as NCCL on the backend's own non-blocking stream
    starts without waiting for the array library's stream (with one rank every collective
    copies its send data to its receive buffer)."""
    in_place_only = frozenset()

    def __init__(self):
        self.ops = QueuedOps()

    def alloc(self, n):
        return self.ops.empty(n)

    def prepare(self, name, send, recv, layout, in_place, root):
        def call():
            recv.array[...] = send.array
        return call

    def sync(self):
        pass

    def barrier(self):
        pass


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_fill_is_done_before_the_collective_reads_it(name, capsys):
    # The first GPU run: the ncclbind and CuPy backends filled on the current stream and called
    # NCCL on their own stream unordered, so every check found stale or zeroed elements.
    from ncclbind.bench.worker import parse_worker_args, run_collective
    args = parse_worker_args(["--backend", "x", "--rank", "0", "--nranks", "1", "--device", "0",
                              "--uid-file", "-", "--collectives", name, "--sizes", "8,1024,65536",
                              "--iters", "2,2,2", "--warmups", "1,1", "--dtype", "float", "--op", "sum",
                              "--root", "0", "--check", "2", "--blocking", "0", "--register", "0"])
    run_collective(OtherStreamBackend(), args, name)
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(results) == 6
    checked = [r for r in results if r["wrong"] is not None]
    assert checked and all(r["wrong"] == 0 for r in checked), results


def test_a_row_a_backend_runs_in_place_for_want_of_an_out_of_place_form_is_marked(capsys):
    from ncclbind.bench.worker import parse_worker_args, run_collective
    backend = OtherStreamBackend()
    backend.in_place_only = frozenset({"all_reduce"})  # as torch.distributed's
    args = parse_worker_args(["--backend", "x", "--rank", "0", "--nranks", "1", "--device", "0",
                              "--uid-file", "-", "--collectives", "all_reduce", "--sizes", "8,1024",
                              "--iters", "2,2", "--warmups", "1,1", "--dtype", "float", "--op", "sum",
                              "--root", "0", "--check", "1", "--blocking", "0", "--register", "0"])
    run_collective(backend, args, "all_reduce")
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["in_place"], r["ran_in_place"]) for r in results} == {(0, 1), (1, 0)}


class LoggingBackend(OtherStreamBackend):
    """A backend of the latency pass that logs what the pass does with it."""

    def __init__(self, name, log, in_place_only=frozenset(), lacks=()):
        super().__init__()
        self.name, self.log, self.in_place_only, self.lacks = name, log, frozenset(in_place_only), lacks
        self.made = 0

    def prepare(self, name, send, recv, layout, in_place, root):
        from ncclbind.bench.python_backends import Unsupported
        if name in self.lacks:
            raise Unsupported(f"{self.name} has no {name}")
        self.log.append(("prepare", self.name, name, layout.count, in_place, send.array.size, recv.array.size))

        def call():
            self.made += 1
            self.log.append(("call", self.name))
        return call

    def barrier(self):
        self.log.append(("barrier", self.name))

    def paths_of(self, run):
        before = self.made
        run()
        return (self.made - before, 0) if self.name == "ncclbind" else None


def latency_args(collectives, sizes="8,16", iters=20, rounds=3, nranks=2, rank=1):
    from ncclbind.bench.worker import parse_worker_args
    n = len(sizes.split(","))
    return parse_worker_args(["--backend", "ncclbind,torch,cupy", "--rank", str(rank), "--nranks", str(nranks),
                              "--device", "0", "--uid-file", "-", "--collectives", collectives, "--sizes", sizes,
                              "--iters", ",".join([str(iters)] * n), "--warmups", "1,1", "--dtype", "float",
                              "--op", "sum", "--root", "0", "--check", "1", "--blocking", "0", "--register", "0",
                              "--latency-rounds", str(rounds)])


def test_latency_pass_interleaves_backends_in_rotated_rounds_with_equal_calls(capsys):
    from ncclbind.bench.worker import latency_batches, run_latency
    log = []
    backends = {b: LoggingBackend(b, log) for b in ("ncclbind", "torch", "cupy")}
    run_latency(backends, latency_args("all_gather"), "all_gather")
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["backend"], r["size"]) for r in records] == [(b, s) for s in (8, 16) for b in backends]
    assert all(len(r["rounds"]) == 3 and r["iters"] == 20 and r["batch"] == 2 and not r["in_place"] for r in records)
    assert latency_batches(1000) == (10, 100) and latency_batches(20) == (10, 2) and latency_batches(3) == (3, 1)
    # at 8 B on 2 ranks: 1 float per rank; every backend the same layout, out of place
    assert [e for e in log if e[0] == "prepare"][:3] == [("prepare", b, "all_gather", 1, False, 1, 2) for b in backends]
    # each round: a barrier, then that backend's calls, backend after backend, the order rotated each round
    first_size = log[:log.index([e for e in log if e[0] == "prepare"][3])]
    segments = [e[1] for e in first_size if e[0] == "barrier"]
    assert segments == ["ncclbind", "torch", "cupy", "torch", "cupy", "ncclbind", "cupy", "ncclbind", "torch"]
    calls = [e[1] for e in first_size if e[0] == "call"]
    assert all(calls.count(b) == 2 + 3 * 20 for b in backends)  # a warm-up batch, then 3 rounds of 20
    ours = [r for r in records if r["backend"] == "ncclbind"]
    assert [r["fast_path"] for r in ours] == [[2, 0], [2, 0]]  # the warm-up batch's calls, observed
    assert {r["fast_path"] for r in records if r["backend"] != "ncclbind"} == {None}


def test_latency_pass_runs_every_backend_in_place_where_one_has_no_out_of_place_form(capsys):
    from ncclbind.bench.worker import run_latency
    log = []
    backends = {"ncclbind": LoggingBackend("ncclbind", log), "torch": LoggingBackend("torch", log, {"all_reduce"}),
                "nccl4py": LoggingBackend("nccl4py", log, lacks=("all_reduce",))}
    run_latency(backends, latency_args("all_reduce", sizes="8"), "all_reduce")
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0] == {"event": "skipped", "backend": "nccl4py", "collective": "all_reduce",
                      "reason": "nccl4py has no all_reduce"}
    assert [(r["backend"], r["in_place"]) for r in out[1:]] == [("ncclbind", 1), ("torch", 1)]
    assert {e[4] for e in log if e[0] == "prepare"} == {True}
    assert not any(e == ("call", "nccl4py") for e in log)


def test_finish_waits_for_the_whole_device_in_torch_and_cupy(monkeypatch):
    import types
    waited = []
    torch = types.SimpleNamespace(float32="float32", cuda=types.SimpleNamespace(synchronize=waited.append))

    class Device:
        def __init__(self, device):
            self.device = device

        def synchronize(self):
            waited.append(("cupy", self.device))
    cupy = types.SimpleNamespace(dtype=lambda name: name, cuda=types.SimpleNamespace(Device=Device))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    ArrayOps("torch", "float", 1).finish()
    ArrayOps("cupy", "float", 1).finish()
    ArrayOps("numpy", "float", 1).finish()  # host memory: nothing queued
    assert waited == [1, ("cupy", 1)]


# ---- aggregation over ranks, the table, JSON, plot -------------------------------------------------

def record(size, in_place, time_us, wrong=0, collective="all_reduce"):
    return {"event": "result", "collective": collective, "size": size, "count": size // 4, "in_place": in_place,
            "time_us": time_us, "wrong": wrong, "iters": 20}


@pytest.mark.parametrize("average, want", [(0, 10.0), (1, 20.0), (2, 10.0), (3, 30.0)])
def test_time_across_ranks_follows_dash_a(average, want):
    config = BenchConfig(average=average)
    ranks = [[record(1024, 0, 10.0, 1)], [record(1024, 0, 30.0, 2)]]
    [r] = aggregate("ncclbind", config, 2, ranks)
    assert r.time_us == want and r.wrong == 3
    assert r.busbw == pytest.approx(1024 / 1e3 / want)  # all_reduce on 2 ranks: factor 1


def test_unchecked_results_stay_unchecked_and_mismatches_are_errors():
    config = BenchConfig()
    [r] = aggregate("c", config, 2, [[record(64, 1, 1.0, None)], [record(64, 1, 1.0, None)]])
    assert r.wrong is None
    with pytest.raises(ValueError, match="rank 1"):
        aggregate("c", config, 2, [[record(64, 0, 1.0)], [record(128, 0, 1.0)]])


@pytest.mark.parametrize("wrongs, match", [((None, 5), "checked on some ranks only"), ((0, -1), "not a count"),
                                           ((3, 0.5), "not a count")])
def test_wrong_counts_that_would_hide_errors_are_refused(wrongs, match):
    # A rank that found 5 wrong elements beside one that did not check must not read as "unchecked".
    with pytest.raises(ValueError, match=match):
        aggregate("rust", BenchConfig(), 2, [[record(64, 1, 1.0, w)] for w in wrongs])


def results_for(backend="ncclbind", collective="all_reduce", sizes=(8, 1 << 20, 1 << 30), nranks=2):
    config = BenchConfig(min_bytes=sizes[0], max_bytes=sizes[-1], step_factor=2)
    ranks = [[record(s, p, 5.0 + s / 1e5, 0 if not p else None, collective) for s in sizes for p in (0, 1)]
             for _ in range(nranks)]
    return config, aggregate(backend, config, nranks, ranks)


def test_table_is_nccl_tests_column_for_column():
    config, results = results_for()
    devices = [{"rank": r, "pid": 100 + r, "host": "node", "device": r, "pci_bus": 0x19, "device_name": "GPU"}
               for r in range(2)]
    text = table(config, "ncclbind", "all_reduce", results, devices)
    lines = text.splitlines()
    assert lines[1] == ("# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
                        "iters: 20 agg iters: 1 validation: 1 graph: 0")
    assert lines[2:5] == ["#", "# Using devices", "#  Rank  0 Group  0 Pid    100 on       node device  0 [0x19] GPU"]
    header = [line for line in lines if "#wrong" in line][0]
    assert header.split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                              "time", "algbw", "busbw", "#wrong"]
    units = lines[lines.index(header) + 1]
    assert units.split() == ["#", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(GB/s)", "(GB/s)"]
    assert "out-of-place" in lines[lines.index(header) - 1] and "in-place" in lines[lines.index(header) - 1]
    rows = [line for line in lines if not line.startswith("#")]
    assert len(rows) == 3
    for row in rows:
        assert len(row) == 52 + 2 * 32  # nccl-tests' fixed widths
        fields = row.split()
        assert len(fields) == 13 and fields[2:5] == ["float", "sum", "-1"]
        assert fields[8] == "0" and fields[12] == "N/A"
    assert rows[-1].split()[0] == str(1 << 30)
    assert lines[-3] == "# Out of bounds values : 0 OK"
    avg = sum(r.busbw for r in results) / len(results)
    assert lines[-2] == "# Avg bus bandwidth    : %g " % avg and lines[-1] == "#"


def test_wrong_results_fail_the_table():
    config, results = results_for()
    results[0].wrong = 4
    text = table(config, "ncclbind", "all_reduce", results, [])
    assert "# Out of bounds values : 1 FAILED" in text
    assert row_line(results[0], results[1]).split()[8] == "4"


def test_time_column_has_fewer_decimals_as_it_grows():
    assert format_time(12.345) == "  12.35"
    assert format_time(123.45) == "  123.5"   # nccl-tests rounds like printf
    assert format_time(12345.6) == "  12346"


def latency_record(backend, size, rounds, collective="all_reduce", in_place=1, fast_path=None):
    return {"event": "latency", "backend": backend, "collective": collective, "size": size, "count": size // 4,
            "in_place": in_place, "rounds": list(rounds), "iters": 1000, "batch": 100, "fast_path": fast_path}


@pytest.mark.parametrize("average, want", [(0, [1.0, 5.0, 3.0]), (1, [2.0, 6.0, 3.5]), (2, [1.0, 5.0, 3.0]),
                                           (3, [3.0, 7.0, 4.0])])
def test_latency_rounds_over_ranks_follow_dash_a_then_median_and_range(average, want):
    ranks = [[latency_record("ncclbind", 8, [1.0, 5.0, 3.0], fast_path=[3000, 0])],
             [latency_record("ncclbind", 8, [3.0, 7.0, 4.0], fast_path=[2999, 1])]]
    [r] = aggregate_latency(BenchConfig(average=average), 2, ranks)
    assert r.rounds == want and r.median_us == sorted(want)[1]
    assert (r.min_us, r.max_us) == (min(want), max(want))
    assert r.fast_path == [5999, 1] and r.in_place and r.iters == 1000


def test_latency_records_must_match_over_ranks():
    with pytest.raises(ValueError, match="rank 1"):
        aggregate_latency(BenchConfig(), 2, [[latency_record("cupy", 8, [1.0])], [latency_record("cupy", 16, [1.0])]])
    with pytest.raises(ValueError, match="rounds"):
        aggregate_latency(BenchConfig(), 2, [[latency_record("cupy", 8, [1.0, 2.0])],
                                             [latency_record("cupy", 8, [1.0])]])


def latency_results(medians: dict, sizes=(8, 16, 32), spread=0.05, collective="all_reduce"):
    """{backend: median per size} -> LatencyResults of 3 rounds each (median - spread, median, median + spread)."""
    records = [latency_record(b, size, [m - spread, m, m + spread], collective)
               for b, per_size in medians.items() for size, m in zip(sizes, per_size)]
    return aggregate_latency(BenchConfig(), 1, [records])


def test_latency_goal_is_judged_from_the_latency_pass_not_from_one_table_row():
    _, ours = results_for("ncclbind")
    _, cupy = results_for("cupy")
    for r in ours:
        r.time_us *= 2  # the tables' one 8 B row says cupy is twice as fast ...
    latency = latency_results({"ncclbind": [7.0, 7.1, 7.2], "cupy": [7.5, 7.6, 7.7], "torch": [12.0, 12.0, 12.1]})
    text, met = summary(ours + cupy, {}, latency, {"status": "ran"})  # ... the latency pass says otherwise
    assert met, text
    assert ("# goal met: all_reduce ncclbind latency (latency pass, median of rounds) the lowest of the Python "
            "backends at 3 of 3 sizes (8 B..32 B)") in text
    assert "time at 8 B" in text  # the row is still shown, for reading


def test_latency_goal_missed_says_where_by_how_much_and_whether_the_ranges_overlap():
    latency = latency_results({"ncclbind": [7.0, 7.65, 9.0], "cupy": [7.5, 7.6, 7.7]})
    text, met = summary([], {}, latency, {"status": "ran"})
    assert not met
    line = [x for x in text.splitlines() if x.startswith("# goal")][0]
    assert line.startswith("# goal MISSED: all_reduce ncclbind latency (latency pass, median of rounds) the lowest "
                           "of the Python backends at 1 of 3 sizes (8 B..32 B); behind at ")
    assert "16 B by 0.05 us (cupy 7.60 vs 7.65, ranges overlap)" in line
    assert "32 B by 1.30 us (cupy 7.70 vs 9.00)" in line  # 8.95 > 7.75: apart


def test_latency_goal_needs_ncclbind_and_another_python_backend():
    _, ours = results_for("ncclbind")
    alone = latency_results({"ncclbind": [7.0, 7.1, 7.2]})
    text, met = summary(ours, {}, alone, {"status": "ran", "reason": ""})
    assert "# goal not judged: all_reduce ncclbind small-message latency: the latency pass: it ran without ncclbind " \
           "or without another Python backend" in text
    text, _ = summary(ours, {}, [], {"status": "unavailable", "reason": "no size of the sweep is at most "
                                                                          "--latency-max (1024 B)"})
    assert "the latency pass: no size of the sweep is at most --latency-max (1024 B)" in text
    # the C and Rust workers are not Python backends: faster or not, they are not in this goal
    latency = latency_results({"ncclbind": [7.0, 7.1, 7.2], "c": [1.0, 1.0, 1.0], "cupy": [8.0, 8.0, 8.0]})
    assert summary([], {}, latency, {"status": "ran"})[1]


def test_latency_table_is_comments_a_row_per_size_a_column_per_backend():
    latency = latency_results({"ncclbind": [7.0, 7.1, 7.2], "cupy": [7.5, 7.6, 7.7]})
    latency += latency_results({"ncclbind": [9.0], "cupy": [8.0]}, sizes=(8,), collective="send_recv")
    for r in latency:
        r.in_place = r.collective == "all_reduce"
    latency[0].fast_path = [3000, 0]
    text = latency_table(BenchConfig(), latency, [{"backend": "nccl4py", "collective": "send_recv",
                                                   "reason": "nccl4py: nccl.core has no group()"}])
    lines = text.splitlines()
    assert all(line.startswith("#") for line in lines)  # nccl-tests' parsers read past it
    assert lines[0] == "# ==== latency at small sizes, us: backend x size, median [min..max of rounds] ===="
    assert "3 rounds" in lines[1] and "1000 calls in 10 batches of 100" in lines[1] and "-a 1 (average)" in lines[1]
    assert "# all_reduce, in place for every backend" in lines
    assert "# send_recv, out of place for every backend" in lines
    start = lines.index("# all_reduce, in place for every backend")
    assert lines[start + 1].split() == ["#", "size", "(B)", "ncclbind", "cupy"]
    assert lines[start + 2].split() == ["#", "8", "7.00", "[6.95..7.05]", "7.50", "[7.45..7.55]"]
    assert "# ncclbind: 3000 of 3000 warm-up method calls (the same calls, untimed) made by the C fast path" in lines
    assert "# skipped in the latency pass: nccl4py send_recv: nccl4py: nccl.core has no group()" in lines


def test_summary_compares_backends_and_states_the_goals():
    _, ours = results_for("ncclbind")
    _, torch = results_for("torch")
    for r in torch:
        r.busbw *= 1.05
    latency = latency_results({"ncclbind": [7.0, 7.1, 7.2], "torch": [9.0, 9.0, 9.0]})
    text, met = summary(ours + torch, {"c": {"status": "unavailable", "reason": "no worker binary"},
                                       "torch": {"status": "ran", "seconds": 12.34}}, latency,
                        {"status": "ran", "seconds": 30.0})
    assert "goal MISSED: all_reduce ncclbind busbw" in text and not met
    assert "goal met: all_reduce ncclbind latency (latency pass, median of rounds)" in text
    assert "# backend c unavailable: no worker binary" in text
    assert "# wall time: torch 12.3 s, latency pass 30.0 s" in text


def test_the_busbw_goal_is_judged_on_the_plateau_rows_not_on_one():
    sizes = (8, 1 << 28, 1 << 29, 1 << 30)
    _, ours = results_for("ncclbind", sizes=sizes)
    _, cupy = results_for("cupy", sizes=sizes)
    # cupy 3% ahead in one plateau row (1 GiB in place) and equal elsewhere: the median row holds
    for r in cupy:
        if r.size == 1 << 30 and r.in_place:
            r.busbw *= 1.03
    text, met = summary(ours + cupy, {})
    line = next(x for x in text.splitlines() if "ncclbind busbw" in x)
    assert line.startswith("# goal met: all_reduce ncclbind busbw on the plateau (268435456..1073741824 B, "
                           "out of and in place: 6 rows) is 1.000 x the best backend's"), line
    assert "lowest 0.971 at 1073741824 B in place, best cupy" in line
    assert met
    # 2% behind in every plateau row (the 8 B rows are not part of it): missed
    for r in cupy:
        r.busbw = next(o.busbw for o in ours if (o.size, o.in_place) == (r.size, r.in_place)) * (
            1.02 if r.size >= 1 << 28 else 0.5)
    text, met = summary(ours + cupy, {})
    assert "# goal MISSED: all_reduce ncclbind busbw on the plateau" in text and "is 0.980 x" in text and not met


def test_on_one_rank_the_busbw_goal_judges_only_out_of_place_rows():
    """One rank, in place: NCCL copies nothing, so a row times a launch (on the H200, 0.4 to 1.5 us for
    256 MiB to 1 GiB, busbw in the hundreds of TB/s) and its spread between backends is noise."""
    sizes = (8, 1 << 28, 1 << 29, 1 << 30)
    _, ours = results_for("ncclbind", sizes=sizes, nranks=1)
    _, cupy = results_for("cupy", sizes=sizes, nranks=1)
    for r in cupy:
        if r.in_place:  # three times "faster" at doing nothing: not counted on one rank
            r.busbw *= 3
    text, met = summary(ours + cupy, {})
    line = next(x for x in text.splitlines() if "ncclbind busbw" in x)
    assert "(268435456..1073741824 B, out of place only (one rank: an in-place call moves no data): 3 rows) " \
           "is 1.000 x" in line and met, line
    _, ours2 = results_for("ncclbind", sizes=sizes, nranks=2)  # on two ranks the same rows count
    _, cupy2 = results_for("cupy", sizes=sizes, nranks=2)
    for r in cupy2:
        if r.in_place:
            r.busbw *= 3
    text, met = summary(ours2 + cupy2, {})
    assert "out of and in place: 6 rows" in text and not met


def test_a_row_run_in_place_is_never_the_best_of_the_busbw_goal():
    """torch.distributed has no out-of-place all_reduce: its out-of-place rows run in place (no
    copy), and 5% faster there must not count against ncclbind's real out-of-place rows."""
    sizes = (8, 1 << 28, 1 << 29, 1 << 30)
    _, ours = results_for("ncclbind", sizes=sizes)
    _, torch = results_for("torch", sizes=sizes)
    for r in torch:
        if not r.in_place:
            r.ran_in_place, r.busbw = True, r.busbw * 1.05
    text, met = summary(ours + torch, {})
    line = next(x for x in text.splitlines() if "ncclbind busbw" in x)
    assert "out of and in place: 3 rows) is 1.000 x" in line and met, line  # the in-place rows only
    assert any(x.startswith("#   torch") and x.endswith("(ran in place: no out-of-place form; not compared)")
               for x in text.splitlines()), text
    for r in torch:  # counted as if run as asked for, the 5% would have missed the goal
        r.ran_in_place = False
    assert not summary(ours + torch, {})[1]


def test_summary_names_every_measurement_with_wrong_elements():
    _, ours = results_for("ncclbind")
    _, rust = results_for("rust", collective="all_gather")
    rust[3].wrong = 17376
    text, _ = summary(ours + rust, {})
    assert "# FAILED: 17376 wrong elements in 1 measurements: rust all_gather 1048576 B in place (17376)" in text


def test_json_round_trip(tmp_path):
    config, results = results_for()
    path = str(tmp_path / "bench.json")
    backends = {"ncclbind": {"status": "ran", "reason": ""}, "rust": {"status": "unavailable", "reason": "x"}}
    write_json(path, config, backends, results, {"host": "node"})
    config2, backends2, results2, env = read_json(path)
    assert config2 == config and backends2 == backends and results2 == results and env == {"host": "node"}
    assert isinstance(results2[0], BenchResult)
    assert read_latency(path) == ({"status": "not run", "reason": ""}, [])
    latency = latency_results({"ncclbind": [7.0, 7.1, 7.2], "cupy": [7.5, 7.6, 7.7]})
    write_json(path, config, backends, results, {}, latency, {"status": "ran", "reason": "", "seconds": 3.0})
    assert read_latency(path) == ({"status": "ran", "reason": "", "seconds": 3.0}, latency)


def test_plot_writes_a_png(tmp_path):
    from ncclbind.bench.plot import plot
    _, a = results_for("ncclbind")
    _, b = results_for("torch", collective="all_gather")
    path = tmp_path / "bench.png"
    plot(a + b, str(path), "test")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


# ---- progress, launchers, backends ----------------------------------------------------------------

def test_progress_bar_only_on_a_tty_or_when_forced():
    out = io.StringIO()
    bar = Progress(4, "always", stream=out)
    for _ in range(4):
        bar.advance("all_reduce")
    bar.close()
    assert "\r[" in out.getvalue() and "100%" in out.getvalue()
    quiet = io.StringIO()  # not a tty
    bar = Progress(4, "auto", stream=quiet)
    bar.advance()
    bar.close()
    assert quiet.getvalue() == ""


@pytest.mark.parametrize("env, want", [
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, (3, 8, 1)),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, (1, 2, 1)),
    ({}, None),
])
def test_launcher_detection(monkeypatch, env, want):
    for var in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert launched_rank() == want


def test_unavailable_backends_say_why(tmp_path):
    config = BenchConfig(host_memory=True, c_worker=str(tmp_path / "missing"), rust_worker=str(tmp_path / "none"))
    command, why = availability("c", config)
    assert command is None and "missing" in why and "bench/cli/c/build.sh" in why
    command, why = availability("rust", config)
    assert command is None and "bench/cli/rust/build.sh" in why
    for name in ("torch", "cupy", "nccl4py"):
        command, why = availability(name, config)
        assert command is None and "--host-memory" in why
    command, why = availability("ncclbind", config)
    assert command[-1] == "ncclbind.bench.worker" and why == ""
    worker = tmp_path / "worker"
    worker.write_text("#!/bin/sh\n")
    worker.chmod(0o755)
    assert availability("c", BenchConfig(c_worker=str(worker)))[0] == [str(worker)]


def test_output_paths_are_checked_before_the_run(tmp_path):
    """A FIFO would block the write at the end of the run, a folder or a read-only file fail
    there: each is refused up front, naming the flag; a new file in a writable folder is fine."""
    import os
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for flag in ("-J", "--plot"):
        with pytest.raises(BenchConfigError, match=f"^{flag}: .* is a FIFO"):
            parse_args([flag, str(fifo)])
        with pytest.raises(BenchConfigError, match=f"^{flag}: .* is a folder"):
            parse_args([flag, str(tmp_path)])
    assert parse_args(["-J", str(tmp_path / "new.json")]).json_path == str(tmp_path / "new.json")
    assert parse_args(["-b", "1", "-e", "1G", "-f", "2"]).size_count() == len(parse_args(["-b", "1", "-e", "1G",
                                                                                           "-f", "2"]).sizes())
