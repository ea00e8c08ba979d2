"""`python -m ncclbind.bench` / `ncclbind-bench`: parse nccl-tests' flags, run every backend,
print nccl-tests' tables (one per backend and collective), the latency pass's table and a
comparison summary, write the JSON (-J) and the PNG (--plot). Exit status: 0, or 1 when a
backend or the latency pass failed or a check found wrong elements (2: a bad command line)."""
from __future__ import annotations

import platform
import socket
import sys

from .config import BenchConfigError, parse_args
from .driver import collect
from .progress import Progress
from .results import aggregate, aggregate_latency, write_json
from .table import latency_table, summary, table


def environment(nranks: int) -> dict:
    info = {"host": socket.gethostname(), "python": platform.python_version(), "nranks": nranks}
    try:
        import ncclbind
        info["ncclbind"] = ncclbind.__version__
        info["libnccl"] = str(ncclbind.version_code())
    except Exception as e:  # noqa: BLE001 - the report says what it could not learn
        info["libnccl"] = f"unknown ({e})"
    return info


def main(argv=None) -> int:
    try:
        config = parse_args(argv)
    except BenchConfigError as e:
        print(f"ncclbind-bench: {e}", file=sys.stderr)
        return 2
    results, statuses, latency, latency_status = [], {}, [], {"status": "not run", "reason": "--latency-max 0"}

    def report(name, run, nranks):
        """Print one backend's tables (or why it did not run) as soon as it is done."""
        status = {"status": run.status, "reason": run.reason, "notes": run.notes, "seconds": round(run.seconds, 1)}
        if run.status == "ran":
            try:
                mine = aggregate(name, config, nranks, [run.records[r] for r in sorted(run.records)])
            except ValueError as e:
                status.update(status="failed", reason=str(e))
                mine = []
            results.extend(mine)
            devices = [dict(run.devices[r], rank=r) for r in sorted(run.devices)]
            for collective in config.collectives:
                text = table(config, name, collective, mine, devices)
                for note in run.notes:
                    text = f"# note: {note}\n" + text
                sys.stdout.write(text + "\n")
        statuses[name] = status
        if status["status"] == "failed":
            print(f"# backend {name} FAILED: {status['reason']}", file=sys.stderr)
        sys.stdout.flush()

    def report_latency(run, nranks):
        """Print the latency pass's table (or why it did not run)."""
        latency_status.update(status=run.status, reason=run.reason, notes=run.notes, skipped=run.skipped,
                              seconds=round(run.seconds, 1))
        if run.status == "ran":
            try:
                latency.extend(aggregate_latency(config, nranks, [run.latency[r] for r in sorted(run.latency)]))
            except ValueError as e:
                latency_status.update(status="failed", reason=str(e))
        if latency_status["status"] == "ran":
            text = latency_table(config, latency, run.skipped)
            for note in run.notes:
                text = f"# note: {note}\n" + text
            sys.stdout.write(text + "\n")
        else:
            sys.stdout.write(f"# latency pass {latency_status['status']}: {latency_status['reason']}\n\n")
        if latency_status["status"] == "failed":
            print(f"# latency pass FAILED: {latency_status['reason']}", file=sys.stderr)
        sys.stdout.flush()

    try:
        runs, nranks, reporter, latency_run = collect(config, lambda total: Progress(total, config.progress), report,
                                                      report_latency)
    except BenchConfigError as e:
        print(f"ncclbind-bench: {e}", file=sys.stderr)
        return 2
    if not reporter:
        ran = list(runs.values()) + ([latency_run] if latency_run else [])
        return 0 if all(r.status != "failed" for r in ran) else 1
    failed = any(s["status"] == "failed" for s in statuses.values()) or latency_status["status"] == "failed"
    text, _ = summary(results, statuses, latency, latency_status)
    sys.stdout.write(text)
    wrong = sum(r.wrong or 0 for r in results)
    # The paths were checked before the run; what can still go wrong (a full disk) is one line.
    if config.json_path:
        try:
            write_json(config.json_path, config, statuses, results, environment(nranks), latency, latency_status)
            print(f"# JSON: {config.json_path}")
        except OSError as e:
            print(f"ncclbind-bench: -J: {config.json_path}: {e.strerror or e}", file=sys.stderr)
            failed = True
    if config.plot_path:
        if results:
            from .plot import plot
            try:
                plot(results, config.plot_path, f"ncclbind.bench, {nranks} rank(s), {config.dtype} {config.op}")
                print(f"# plot: {config.plot_path}")
            except OSError as e:
                print(f"ncclbind-bench: --plot: {config.plot_path}: {e.strerror or e}", file=sys.stderr)
                failed = True
        else:
            print("# plot: nothing ran, no plot written", file=sys.stderr)
            failed = True
    if wrong:
        print(f"# {wrong} wrong elements: FAILED", file=sys.stderr)
    return 1 if failed or wrong else 0
