"""nccl-tests' text output, column for column (header lines, out-of-place and in-place
time/algbw/busbw/#wrong, "# Out of bounds values", "# Avg bus bandwidth"), one table per
backend and collective, so the parsers people already have read it; and the comparison
summary across backends."""
from __future__ import annotations

from .collectives import COLLECTIVES
from .config import BenchConfig
from .results import BenchResult

BACKEND_TITLES = {
    "ncclbind": "ncclbind Python (Communicator methods)",
    "rust": "ncclbind Rust (safe crate, bench/cli/rust)",
    "c": "ncclbind C (generated nb_* over the runtime, bench/cli/c)",
    "torch": "torch.distributed (ProcessGroupNCCL)",
    "cupy": "CuPy cupy.cuda.nccl",
    "nccl4py": "nccl4py (nccl.core)",
}
PYTHON_BACKENDS = ("ncclbind", "torch", "cupy", "nccl4py")


def format_time(time_us: float) -> str:
    """nccl-tests' time column: fewer decimals as the time grows."""
    if time_us >= 10000.0:
        return "%7.0f" % time_us
    if time_us >= 100.0:
        return "%7.1f" % time_us
    return "%7.2f" % time_us


def header_lines(config: BenchConfig, devices: list[dict]) -> list[str]:
    step = (config.step_factor, "factor") if config.step_factor > 1 else (config.step_bytes, "bytes")
    lines = ["# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d "
             "agg iters: %d validation: %d graph: %d"
             % (1, 1, config.min_bytes, config.max_bytes, step[0], step[1], config.warmup_iters, config.iters,
                1, config.check, 0)]
    if config.blocking:
        lines.append("# Blocking Enabled: wait for completion and barrier after each collective ")
    lines += ["#", "# Using devices"]
    for d in devices:
        lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s"
                     % (d["rank"], 0, d.get("pid", 0), d.get("host", "?"), d.get("device", 0),
                        d.get("pci_bus", 0), d.get("device_name", "?")))
    lines.append("#")
    return lines


def column_lines() -> list[str]:
    return [
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
        % ("", "", "", "", ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
        % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong"),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
    ]


def _cells(r: BenchResult) -> str:
    wrong = "N/A" if r.wrong is None else "%5g" % r.wrong
    return "  %7s  %6.2f  %6.2f  %5s" % (format_time(r.time_us), r.algbw, r.busbw, wrong)


def row_line(out_of_place: BenchResult, in_place: BenchResult) -> str:
    r = out_of_place
    return "%12d  %12d  %8s  %6s  %6i" % (r.size, r.count, r.dtype, r.op, r.root) + _cells(r) + _cells(in_place)


def table(config: BenchConfig, backend: str, collective: str, results: list[BenchResult],
          devices: list[dict]) -> str:
    """One nccl-tests table: the results of one backend and collective."""
    lines = ["# ncclbind.bench: %s, backend %s: %s" % (COLLECTIVES[collective].perf_name, backend,
                                                       BACKEND_TITLES.get(backend, backend))]
    if config.register:
        lines.append("# -R %d: %s" % (config.register, register_note(config.register, backend)))
    if config.host_memory:
        lines.append("# host memory (a stand-in libnccl on a CPU machine): these are not GPU figures")
    lines += header_lines(config, devices) + column_lines()
    mine = [r for r in results if r.backend == backend and r.collective == collective]
    by_size = {}
    for r in mine:
        by_size.setdefault(r.size, {})[r.in_place] = r
    errors, busbw = 0, []
    for size in sorted(by_size):
        pair = by_size[size]
        if False not in pair or True not in pair:
            continue
        lines.append(row_line(pair[False], pair[True]))
        for r in pair.values():
            busbw.append(r.busbw)
            errors += bool(r.wrong)
    average = sum(busbw) / len(busbw) if busbw else 0.0
    lines += ["# Out of bounds values : %d %s" % (errors, "FAILED" if errors else "OK"),
              "# Avg bus bandwidth    : %g " % average, "#"]
    return "\n".join(lines) + "\n"


def register_note(mode: int, backend: str) -> str:
    if backend in ("torch", "cupy", "nccl4py"):
        return "not applied: this backend has no registration call here, its buffers are plain"
    return ("buffers from ncclMemAlloc, registered with ncclCommRegister" if mode == 1 else
            "buffers from ncclMemAlloc in an NCCL_WIN_COLL_SYMMETRIC window (ncclCommWindowRegister)")


def summary(results: list[BenchResult], backends: dict) -> tuple[str, bool]:
    """Per collective: busbw at the largest size (out of place) per backend with ncclbind's
    ratio to the best, and the time at the smallest size; the goals (ncclbind's busbw within
    1% of the best backend; its small-message time the lowest of the Python backends).
    Returns (text, every goal met)."""
    lines, all_met = ["# ==== summary: out-of-place, per collective ===="], True
    for collective in dict.fromkeys(r.collective for r in results):
        rows = [r for r in results if r.collective == collective and not r.in_place]
        if not rows:
            continue
        largest, smallest = max(r.size for r in rows), min(r.size for r in rows if r.count > 0) \
            if any(r.count > 0 for r in rows) else min(r.size for r in rows)
        big = {r.backend: r for r in rows if r.size == largest}
        small = {r.backend: r for r in rows if r.size == smallest}
        lines.append("# %s: busbw at %d B / time at %d B" % (collective, largest, smallest))
        for name in big:
            s = small.get(name)
            lines.append("#   %-10s %9.2f GB/s  %9.2f us" % (name, big[name].busbw, s.time_us if s else float("nan")))
        if "ncclbind" in big and len(big) > 1:
            best = max(big.values(), key=lambda r: r.busbw)
            ratio = big["ncclbind"].busbw / best.busbw if best.busbw else 1.0
            met = ratio >= 0.99
            all_met &= met
            lines.append("# goal %s: %s ncclbind busbw at %d B is %.3f x the best (%s)"
                         % ("met" if met else "MISSED", collective, largest, ratio, best.backend))
        pythons = {k: v for k, v in small.items() if k in PYTHON_BACKENDS}
        if "ncclbind" in pythons and len(pythons) > 1:
            fastest = min(pythons.values(), key=lambda r: r.time_us)
            met = fastest.backend == "ncclbind" or pythons["ncclbind"].time_us <= fastest.time_us
            all_met &= met
            lines.append("# goal %s: %s ncclbind time at %d B %.2f us, lowest of the Python backends: %s %.2f us"
                         % ("met" if met else "MISSED", collective, smallest, pythons["ncclbind"].time_us,
                            fastest.backend, fastest.time_us))
    for name, status in backends.items():
        if status.get("status") != "ran":
            lines.append("# backend %s %s: %s" % (name, status.get("status"), status.get("reason", "")))
    return "\n".join(lines) + "\n", all_met
