"""nccl-tests' text output, column for column (header lines, out-of-place and in-place
time/algbw/busbw/#wrong, "# Out of bounds values", "# Avg bus bandwidth"), one table per
backend and collective, so the parsers people already have read it; and the comparison
summary across backends."""
from __future__ import annotations

import statistics

from .collectives import COLLECTIVES
from .config import PYTHON_BACKENDS, BenchConfig
from .results import BenchResult, LatencyResult

BACKEND_TITLES = {
    "ncclbind": "ncclbind Python (Communicator methods, prepared: ncclbind.prepare)",
    "rust": "ncclbind Rust (safe crate, bench/cli/rust)",
    "c": "ncclbind C (generated nb_* over the runtime, bench/cli/c)",
    "torch": "torch.distributed (ProcessGroupNCCL)",
    "cupy": "CuPy cupy.cuda.nccl",
    "nccl4py": "nccl4py (nccl.core)",
}


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


def latency_cell(r: LatencyResult | None) -> str:
    if r is None:
        return "%-24s" % "-"
    return "%-24s" % ("%.2f [%.2f..%.2f]" % (r.median_us, r.min_us, r.max_us))


def latency_table(config: BenchConfig, latency: list[LatencyResult], skipped: list[dict] = ()) -> str:
    """The latency pass: per collective, a row per size and a column per backend, each cell the
    median round's time per call and the range of the rounds, in us. Every line is a comment, so
    that nccl-tests' parsers read past it."""
    if not latency:
        return ""
    first = latency[0]
    from .worker import latency_batches
    batches, per = latency_batches(first.iters)
    lines = ["# ==== latency at small sizes, us: backend x size, median [min..max of rounds] ====",
             "# %d rounds, the Python backends in one process per rank; in each round every backend in turn (the "
             "order rotated by one each round) makes %d calls in %d batches of %d, each batch timed from its first "
             "launch to its stream's completion; a round's value: its median batch, over the ranks as -a %d (%s)"
             % (len(first.rounds), first.iters, batches, per, config.average,
                {0: "rank 0", 1: "average", 2: "minimum", 3: "maximum"}[config.average])]
    if config.host_memory:
        lines.append("# host memory (a stand-in libnccl on a CPU machine): these are not GPU figures")
    for collective in dict.fromkeys(r.collective for r in latency):
        mine = [r for r in latency if r.collective == collective]
        backends = list(dict.fromkeys(r.backend for r in mine))
        placement = "in place" if mine[0].in_place else "out of place"
        lines.append("# %s, %s for every backend" % (collective, placement))
        lines.append(("# %10s  %s" % ("size (B)", "".join("%-24s" % b for b in backends))).rstrip())
        cells = {(r.backend, r.size): r for r in mine}
        for size in sorted({r.size for r in mine}):
            row = "".join(latency_cell(cells.get((b, size))) for b in backends)
            lines.append(("# %10d  %s" % (size, row)).rstrip())
        for b in backends:
            counts = [r.fast_path for r in mine if r.backend == b and r.fast_path is not None]
            if counts:
                made, declined = sum(c[0] for c in counts), sum(c[1] for c in counts)
                lines.append("# %s: %d of %d warm-up method calls (the same calls, untimed) made by the C fast path%s"
                             % (b, made, made + declined, "" if not declined else
                                " (%d given to the Python definition)" % declined))
    for entry in skipped:
        lines.append("# skipped in the latency pass: %s%s: %s" % (
            entry.get("backend"), " " + entry["collective"] if entry.get("collective") else "", entry.get("reason")))
    return "\n".join(lines) + "\n#\n"


def latency_goal(collective: str, latency: list[LatencyResult]) -> tuple[str, bool] | None:
    """The small-message goal of one collective from the latency pass: ncclbind's median the
    lowest of the Python backends at every size; where it is not, by how much and whether the
    rounds' ranges overlap. None when ncclbind or every other Python backend is missing."""
    mine = [r for r in latency if r.collective == collective and r.backend in PYTHON_BACKENDS]
    sizes = sorted({r.size for r in mine})
    cells = {(r.backend, r.size): r for r in mine}
    if not any(r.backend == "ncclbind" for r in mine) or len({r.backend for r in mine}) < 2:
        return None
    behind, judged = [], 0
    for size in sizes:
        ours = cells.get(("ncclbind", size))
        others = [r for r in mine if r.size == size and r.backend != "ncclbind"]
        if ours is None or not others:
            continue
        judged += 1
        best = min(others, key=lambda r: r.median_us)
        if ours.median_us > best.median_us:
            overlap = ours.min_us <= best.max_us
            behind.append("%d B by %.2f us (%s %.2f vs %.2f%s)" % (
                size, ours.median_us - best.median_us, best.backend, best.median_us, ours.median_us,
                ", ranges overlap" if overlap else ""))
    met = not behind
    text = "# goal %s: %s ncclbind latency (latency pass, median of rounds) the lowest of the Python backends " \
        "at %d of %d sizes (%d B..%d B)" % ("met" if met else "MISSED", collective, judged - len(behind), judged,
                                             sizes[0], sizes[-1])
    if behind:
        text += "; behind at " + ", ".join(behind[:4]) + (", ..." if len(behind) > 4 else "")
    return text, met


PLATEAU_FRACTION = 4  # the plateau: sizes from largest / PLATEAU_FRACTION up
BUSBW_GOAL = 0.99


def busbw_goal(collective: str, rows: list[BenchResult], largest: int) -> tuple[str, bool] | None:
    """The busbw goal (ncclbind within 1% of the best backend) on the bandwidth plateau: every
    measurement at sizes from largest / PLATEAU_FRACTION up, out of place and in place, that
    ncclbind and another backend both have. Per measurement, ncclbind's busbw over the best
    backend's; the goal is judged by the median of those ratios, and the line gives the lowest
    with its row. One row alone is not evidence: every backend calls the same NCCL kernel, and at
    1 GiB a row is a few iterations (--iter-bytes-cap) whose spread between backends run one after
    the other (2x H200: up to 3%, either way) is the machine's, not a binding's.
    On one rank an in-place call moves no data (NCCL copies between the buffers only when they
    differ), so its row times a launch, not a bandwidth: only out-of-place rows are judged there."""
    one_rank = all(r.nranks == 1 for r in rows)
    plateau = [r for r in rows if r.size >= largest / PLATEAU_FRACTION and r.count > 0
               and not (one_rank and r.in_place)]
    by_row: dict[tuple, dict[str, BenchResult]] = {}
    for r in plateau:
        if not r.ran_in_place:  # a row run in place is not the asked-for variant: never the best
            by_row.setdefault((r.size, r.in_place), {})[r.backend] = r
    ratios = []
    for (size, in_place), row in sorted(by_row.items()):
        if "ncclbind" in row and len(row) > 1:
            best = max(row.values(), key=lambda r: r.busbw)
            ratios.append((row["ncclbind"].busbw / best.busbw if best.busbw else 1.0, size, in_place, best.backend))
    if not ratios:
        return None
    median = statistics.median(ratio for ratio, *_ in ratios)
    low = min(ratios)
    met = median >= BUSBW_GOAL
    sizes = sorted({size for _, size, _, _ in ratios})
    return ("# goal %s: %s ncclbind busbw on the plateau (%d..%d B, %s: %d rows) is %.3f x the "
            "best backend's (median of rows; lowest %.3f at %d B %s, best %s)"
            % ("met" if met else "MISSED", collective, sizes[0], sizes[-1],
               "out of place only (one rank: an in-place call moves no data)" if one_rank else "out of and in place",
               len(ratios), median, low[0], low[1], "in place" if low[2] else "out of place", low[3]), met)


def summary(results: list[BenchResult], backends: dict, latency: list[LatencyResult] | None = None,
            latency_pass: dict | None = None) -> tuple[str, bool]:
    """Per collective: busbw at the largest size (out of place) per backend with ncclbind's
    ratio to the best, and the time at the smallest size (one row of each table: for reading,
    not for judging); the goals: ncclbind's busbw within 1% of the best backend, and its
    small-message latency the lowest of the Python backends, judged from the latency pass
    (latency_goal) and from nothing else. Then the wrong elements, named by row, and the
    backends that did not run. Returns (text, every goal met)."""
    lines, all_met = ["# ==== summary: out-of-place, per collective ===="], True
    latency = latency or []
    for collective in dict.fromkeys([r.collective for r in results] + [r.collective for r in latency]):
        rows = [r for r in results if r.collective == collective and not r.in_place]
        if rows:
            largest, smallest = max(r.size for r in rows), min(r.size for r in rows if r.count > 0) \
                if any(r.count > 0 for r in rows) else min(r.size for r in rows)
            big = {r.backend: r for r in rows if r.size == largest}
            small = {r.backend: r for r in rows if r.size == smallest}
            lines.append("# %s: busbw at %d B / time at %d B (one row of its table)" % (collective, largest, smallest))
            for name in big:
                s = small.get(name)
                lines.append("#   %-10s %9.2f GB/s  %9.2f us%s"
                             % (name, big[name].busbw, s.time_us if s else float("nan"),
                                "  (ran in place: no out-of-place form; not compared)" if big[name].ran_in_place
                                else ""))
            goal = busbw_goal(collective, [r for r in results if r.collective == collective], largest)
            if goal is not None:
                lines.append(goal[0])
                all_met &= goal[1]
        goal = latency_goal(collective, latency)
        if goal is not None:
            lines.append(goal[0])
            all_met &= goal[1]
        elif any(r.backend in PYTHON_BACKENDS for r in rows):
            status = latency_pass or {}
            why = status.get("reason") or ("it ran without ncclbind or without another Python backend"
                                           if status.get("status") == "ran" else "it did not run")
            lines.append("# goal not judged: %s ncclbind small-message latency: the latency pass: %s"
                         % (collective, why.splitlines()[0] if why else "it did not run"))
    bad = [r for r in results if r.wrong]
    if bad:
        lines.append("# FAILED: %d wrong elements in %d measurements: %s" % (
            sum(r.wrong for r in bad), len(bad), ", ".join(
                "%s %s %d B %s (%d)" % (r.backend, r.collective, r.size, "in place" if r.in_place else "out of place",
                                        r.wrong) for r in bad[:6]) + (", ..." if len(bad) > 6 else "")))
    for name, status in backends.items():
        if status.get("status") != "ran":
            lines.append("# backend %s %s: %s" % (name, status.get("status"), status.get("reason", "")))
    seconds = ["%s %.1f s" % (name, status["seconds"]) for name, status in backends.items() if status.get("seconds")]
    if latency_pass and latency_pass.get("seconds"):
        seconds.append("latency pass %.1f s" % latency_pass["seconds"])
    if seconds:
        lines.append("# wall time: " + ", ".join(seconds))
    return "\n".join(lines) + "\n", all_met
