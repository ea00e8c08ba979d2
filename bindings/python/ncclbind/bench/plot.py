"""The PNG: bus bandwidth and time against size (log-log), one line per backend, one row of
two panels per collective (out-of-place results). matplotlib with the Agg backend (no display)."""
from __future__ import annotations

from .results import BenchResult
from .table import BACKEND_TITLES


def plot(results: list[BenchResult], path: str, title: str = "") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    collectives = list(dict.fromkeys(r.collective for r in results))
    if not collectives:
        raise ValueError("plot: no results to draw")
    fig, axes = plt.subplots(len(collectives), 2, figsize=(12, 3.6 * len(collectives)), squeeze=False)
    for row, collective in enumerate(collectives):
        mine = [r for r in results if r.collective == collective and not r.in_place and r.size > 0]
        for backend in dict.fromkeys(r.backend for r in mine):
            points = sorted((r.size, r.busbw, r.time_us) for r in mine if r.backend == backend)
            sizes = [p[0] for p in points]
            label = BACKEND_TITLES.get(backend, backend)
            axes[row][0].plot(sizes, [p[1] for p in points], marker=".", label=label)
            axes[row][1].plot(sizes, [p[2] for p in points], marker=".", label=label)
        for col, ylabel in ((0, "busbw (GB/s)"), (1, "time (us)")):
            ax = axes[row][col]
            ax.set_xscale("log", base=2)
            if col == 1:
                ax.set_yscale("log")
            ax.set_xlabel("size (B)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{collective}: {ylabel.split(' ')[0]}")
            ax.grid(True, which="both", alpha=0.3)
        axes[row][0].legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
