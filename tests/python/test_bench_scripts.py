"""The benchmark scripts' row machinery on a CPU: bench/python/bench_allreduce.py
(--quick) and the latency rows of tests/multigpu/python/ranks.py --bench run over the
stand-in libnccl (fake_nccl.c), with NumPy host arrays posing as torch tensors and
CuPy arrays, so that a broken script fails here and not in the one GPU session.
No timing is asserted; rows that need a GPU (torch.distributed, cupy.cuda.nccl,
nccl4py, the synchronize) must say why they were skipped.

Like test_communicator_fake.py, the module runs itself again in a subprocess with
the stand-in as the only libnccl (stand_ins.run_over_stand_in).
"""
from __future__ import annotations

import contextlib
import importlib
import json
import pathlib
import sys
import types

import numpy as np
import pytest

from stand_ins import INSIDE, run_over_stand_in

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "python"
RANKS = ROOT / "tests" / "multigpu" / "python"

if not INSIDE:
    def test_bench_scripts_over_the_stand_in_library(tmp_path, monkeypatch):
        monkeypatch.setenv("NCCLBIND_BENCH_BUILD", str(tmp_path / "bench-build"))  # raw_loop builds bench_loop.c
        run_over_stand_in(__file__, tmp_path)

else:
    import stand_ins

    def install_torch():
        """stand_ins' torch plus what the benchmarks call: ones/zeros, torch.cuda's streams and synchronize."""
        torch = stand_ins.install_torch()
        torch.__version__ = "stand-in"
        torch.ones = lambda n, device="cuda:0": torch.Tensor(np.ones(n))
        torch.zeros = lambda n, device="cuda:0": torch.Tensor(np.zeros(n))

        class Stream:  # cuda_stream is a property of torch.cuda.Stream's class, as the fast path looks it up
            def __init__(self, device=0, handle=0):
                self._handle = handle

            @property
            def cuda_stream(self):
                return self._handle

        torch.cuda = types.SimpleNamespace(
            Stream=Stream, default_stream=lambda device=0: Stream(device), synchronize=lambda: None,
            current_device=lambda: 0,
            current_stream=lambda: Stream(), stream=lambda s: contextlib.nullcontext(),
            set_device=lambda device: None, get_device_name=lambda device=0: "stand-in (host memory)")
        return torch

    def install_cupy():
        cupy = stand_ins.install_cupy()
        cupy.__version__ = "stand-in"
        cupy.float32 = np.float32
        cupy.ones = lambda n, dtype=np.float32: cupy.ndarray(np.ones(n), dtype=dtype)
        cupy.zeros = lambda n, dtype=np.float32: cupy.ndarray(np.zeros(n), dtype=dtype)

        class Stream:  # ptr is a property of CuPy's stream classes
            def __init__(self, non_blocking=False, handle=0):
                self._handle = handle

            @property
            def ptr(self):
                return self._handle

        Stream.null = Stream()
        cupy.cuda = types.SimpleNamespace(Stream=Stream, ExternalStream=lambda ptr, device_id=0: Stream(handle=ptr),
                                          Device=lambda device=0: contextlib.nullcontext())
        return cupy

    def import_script(directory: pathlib.Path, name: str):
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
        return importlib.import_module(name)

    @pytest.fixture
    def bench():
        yield import_script(BENCH, "bench_allreduce")
        for module in ("torch", "cupy"):
            sys.modules.pop(module, None)

    def run_bench(bench, tmp_path, *args):
        out = tmp_path / "bench.json"
        assert bench.main(["--quick", "--iterations", "40", "--batch", "10", "--json", str(out), *args]) == 0
        return json.loads(out.read_text())

    def test_bench_allreduce_quick_every_row_runs_or_says_why(bench, tmp_path, capsys):
        install_torch()
        install_cupy()
        result = run_bench(bench, tmp_path)
        printed = capsys.readouterr().out
        rows = result["rows"]
        measured = {k[:-len(" (enqueue us/call)")] for k in rows if k.endswith(" (enqueue us/call)")}
        skipped = {k: v for k, v in rows.items() if isinstance(v, str)}
        for name in ("raw C ncclAllReduce loop", "raw C ncclAllReduce in place", "_nccl.all_reduce in place",
                     "all_reduce(x, stream=int) torch", "all_reduce(x, op='sum', stream=int) torch",
                     "all_reduce(x, op=0, stream=int) torch",
                     "all_reduce(x, op=NcclRedOp.SUM, stream=torch.cuda.Stream) torch",
                     "all_reduce(x, stream=cupy Stream) CuPy", "raw C broadcast in place",
                     "Communicator.broadcast in place torch", "_nccl.reduce in place",
                     "Communicator.all_gather in-place layout CuPy", "Communicator.reduce_scatter in-place layout torch",
                     "Communicator.gather in-place layout torch", "Communicator.scatter in-place layout CuPy",
                     "Communicator.all_to_all out of place torch", "raw C group(ncclSend, ncclRecv)",
                     "_nccl group_start, send, recv, group_end", "with group(): Communicator.send, recv CuPy"):
            assert name in measured, (name, skipped)
            assert isinstance(rows[f"{name} (enqueue us/call)"], float)
        # GPU-only rows are skipped with the reason
        assert "torch.distributed" in skipped["torch.distributed.all_reduce (in place)"]
        assert skipped["cupy.cuda.nccl rows"].startswith("skipped: ")
        assert "nccl4py" in skipped
        assert set(measured) | set(skipped) >= {"raw C ncclAllReduce in place"}
        # the Pythonic rows went through Communicator (their path is counted), the raw ones did not
        paths = result["paths"]
        assert paths["raw C ncclAllReduce in place"] == "-"
        assert paths["all_reduce(x, stream=int) torch"] != "-"
        assert result["warmup_paths"]["all_reduce"][0] + result["warmup_paths"]["all_reduce"][1] > 0
        for line in ("x raw C", "+us vs raw", "NCCL 2.28.9", "torch stand-in", "CuPy stand-in",
                     "-- all_reduce, in place", "fast path (the warm-ups' calls"):
            assert line in printed, line
        assert any(goal.startswith("_nccl.all_reduce in place within 1.3x") for goal in result["goals"])

    def test_bench_allreduce_rows_filter_keeps_the_raw_row(bench, tmp_path, capsys):
        install_torch()
        result = run_bench(bench, tmp_path, "--rows", r"op='sum'", "--repeats", "1")
        measured = [k for k in result["rows"] if k.endswith(" (enqueue us/call)")]
        assert measured == ["raw C ncclAllReduce in place (enqueue us/call)",
                            "all_reduce(x, op='sum', stream=int) torch (enqueue us/call)"]
        assert bench.main(["--quick", "--rows", "no such row"]) == 2
        assert bench.main(["--list"]) == 0
        assert "send/recv to self in a group: raw C group(ncclSend, ncclRecv)" in capsys.readouterr().out

    def test_bench_allreduce_without_torch_or_cupy_skips_with_reasons(bench, tmp_path):
        for module in ("torch", "cupy"):
            sys.modules[module] = None  # import fails, as where they are not installed
        result = run_bench(bench, tmp_path, "--rows", "in place", "--repeats", "1")
        rows = result["rows"]
        assert rows["torch rows"].startswith("skipped: ") and rows["CuPy rows"].startswith("skipped: ")
        for name, value in rows.items():
            assert isinstance(value, float) or value.startswith("skipped: "), name

    def test_ranks_bench_latency_rows_on_one_stand_in_rank(capsys):
        torch = install_torch()
        install_cupy()
        ranks = import_script(RANKS, "ranks")
        import ncclbind
        comm = ncclbind.Communicator.init(1, 0, ncclbind.get_unique_id())
        try:
            table = ranks.latency_rows(torch, None, comm, 0, 1, iterations=20, repeats=2,
                                       synchronize=lambda stream: None)
        finally:
            comm.destroy()
            sys.modules.pop("torch", None)
            sys.modules.pop("cupy", None)
        printed = capsys.readouterr().out
        assert "Communicator.all_gather (CuPy)" in table and "with group(): Communicator.send, recv (CuPy)" in table
        for collective in ("all_reduce", "all_gather", "broadcast", "send/recv ring"):
            assert f"raw C {collective}" in table and f"Communicator.{collective.split('/')[0]}" in printed
        assert "x raw C" in printed and "torch.distributed" in printed
