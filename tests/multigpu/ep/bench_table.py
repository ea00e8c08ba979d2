"""One table from the NCCL EP benchmarks' BENCH lines (C, Rust, Python and Python raw).

    python3 tests/multigpu/ep/bench_table.py [FILE ...]     (no FILE: stdin)

Each input line that starts with "BENCH " carries one JSON object: layer ("c", "rust",
"rust_raw", "python", "python_prepared", "python_raw", "c_in_python"), algo, phase, tokens, hidden,
topk, experts, dtype, us_median, us_p10. Other lines are ignored. "rust_raw" and "python_raw" are
the generated calls with the same records, interleaved per iteration with the layer in its process;
"python_prepared" is ncclbind.ep.prepare's steps of the same calls;
"c_in_python" is NCCL EP's functions called from C (bench/python/bench_loop.c) in the Python
process, interleaved the same way. The table has a row per (algo, phase, size) and, per layer,
the median
of that layer's medians over the rounds given (bench.sh runs the layers in interleaved rounds,
C, Rust, Python, C, Rust, Python, ..., so that drift between separate runs does not pass for a
layer's cost), with [min..max] of the rounds when there are several; the other layers show their
difference to C in percent. The goal (the issue's): Python and Rust add under GOAL_PERCENT to C.
Throughput: the column "C GB/s" is the routed payload, tokens x top-k x hidden x the element's
bytes (each token's row goes to top-k experts on dispatch and comes back from them on combine;
the bytes a rank's layer hands over and gets back, not the wire bytes, which depend on how many
experts of one token share a rank), divided by C's median time; tokens/s follows from the time.
"""
from __future__ import annotations

import json
import statistics
import sys
from typing import Iterable

LAYERS = ("c", "rust", "rust_raw", "python", "python_prepared", "python_raw", "c_in_python")
TITLES = {"c": "C us", "rust": "Rust us", "rust_raw": "Rust raw us", "python": "Python us",
          "python_prepared": "Python prepared us", "python_raw": "Python raw us",
          "c_in_python": "C in Python's process us"}
# (layer, baseline, what the baseline is): both measured interleaved per iteration in one process.
SAME_PROCESS = (("rust", "rust_raw", "its raw calls"), ("python", "python_raw", "its raw calls"),
                ("python", "c_in_python", "the C calls"), ("python_prepared", "c_in_python", "the C calls"),
                ("python_raw", "c_in_python", "the C calls"))
KEY_FIELDS = ("algo", "phase", "tokens", "hidden", "topk", "experts", "dtype")
GOAL_PERCENT = 2.0
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "e4m3": 1, "e5m2": 1}


def parse(lines: Iterable[str]) -> dict[tuple, dict[str, list[float]]]:
    """{(algo, phase, tokens, hidden, topk, experts, dtype): {layer: [us_median of each round]}}."""
    rows: dict[tuple, dict[str, list[float]]] = {}
    for number, line in enumerate(lines, 1):
        if not line.startswith("BENCH "):
            continue
        try:
            record = json.loads(line[len("BENCH "):])
            key = tuple(record[field] for field in KEY_FIELDS)
            layer, median = record["layer"], float(record["us_median"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"line {number}: not a BENCH record ({e}): {line.rstrip()}") from None
        if layer not in LAYERS:
            raise ValueError(f"line {number}: unknown layer {layer!r} (one of {', '.join(LAYERS)})")
        rows.setdefault(key, {}).setdefault(layer, []).append(median)
    return rows


def central(rounds: list[float] | None) -> float | None:
    return None if not rounds else statistics.median(rounds)


def spread(rounds: list[float]) -> str:
    return "" if len(rounds) < 2 else f" [{min(rounds):.1f}..{max(rounds):.1f}]"


def percent_over_c(value: float, c: float | None) -> str:
    return "" if c is None or c <= 0 else f" ({(value - c) / c * 100:+.1f}%)"


def throughput_gbps(key: tuple, us: float | None) -> str:
    """The routed payload (tokens x topk x hidden x element bytes) per microsecond, in GB/s."""
    _, _, tokens, hidden, topk, _, dtype = key
    size = ELEMENT_BYTES.get(dtype)
    if not us or size is None:
        return "-"
    return f"{tokens * topk * hidden * size / (us * 1e3):.1f}"


def table(rows: dict[tuple, dict[str, list[float]]]) -> str:
    layers = [layer for layer in LAYERS if any(layer in row for row in rows.values())]
    header = ["algo", "phase", "size"] + [TITLES[layer] for layer in layers]
    if "c" in layers:
        header.insert(4, "C GB/s")
    body = []
    algo_order = {"ll": 0, "ht": 1}  # low latency first, dispatch before combine
    for key in sorted(rows, key=lambda k: (algo_order.get(k[0], 2), k[0], k[2:], k[1] != "dispatch", k[1])):
        algo, phase, tokens, hidden, topk, experts, dtype = key
        row = rows[key]
        c = central(row.get("c"))
        cells = [algo, phase, f"{tokens}x{hidden} top{topk}/{experts} {dtype}"]
        for layer in layers:
            value = central(row.get(layer))
            cells.append("-" if value is None else f"{value:.1f}" + spread(row[layer]) +
                         ("" if layer == "c" else percent_over_c(value, c)))
            if layer == "c":
                cells.append(throughput_gbps(key, c))
        body.append(cells)
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def goal_lines(rows: dict[tuple, dict[str, list[float]]]) -> list[str]:
    """For every row with C, whether Rust and Python (its methods, its prepared steps) stay under
    GOAL_PERCENT over C (medians of the rounds' medians), with the number of rounds it rests on."""
    out = []
    for key, row in sorted(rows.items()):
        c = central(row.get("c"))
        if not c:
            continue
        for layer in ("rust", "python", "python_prepared"):
            if layer in row:
                over = (central(row[layer]) - c) / c * 100
                verdict = "meets" if over < GOAL_PERCENT else "misses"
                out.append(f"{verdict} the {GOAL_PERCENT:g}% goal: {layer} {key[0]} {key[1]} "
                           f"{key[2]}x{key[3]} top{key[4]}/{key[5]} {key[6]}: {over:+.1f}% over C "
                           f"({len(row[layer])} rounds of {layer}, {len(row['c'])} of C)")
    return out


def layer_lines(rows: dict[tuple, dict[str, list[float]]]) -> list[str]:
    """What each layer adds over a baseline measured in the same process, interleaved per iteration
    (no drift between processes in it): its raw generated calls, and for Python the C calls too.
    The median over the rounds of each round's layer / baseline, against GOAL_PERCENT."""
    out = []
    for key, row in sorted(rows.items()):
        for layer, baseline, what in SAME_PROCESS:
            if layer in row and baseline in row and len(row[layer]) == len(row[baseline]):
                over = statistics.median((a - b) / b * 100 for a, b in zip(row[layer], row[baseline]) if b > 0)
                verdict = "under" if over < GOAL_PERCENT else "over"
                out.append(f"{layer} over {what}, same process: {key[0]} {key[1]} {key[2]}x{key[3]} "
                           f"top{key[4]}/{key[5]} {key[6]}: {over:+.1f}% ({verdict} {GOAL_PERCENT:g}%; median of "
                           f"{len(row[layer])} rounds)")
    return out


def main(argv: list[str]) -> int:
    lines: list[str] = []
    if argv:
        for path in argv:
            with open(path) as f:
                lines.extend(f)
    else:
        lines = sys.stdin.readlines()
    rows = parse(lines)
    if not rows:
        print("no BENCH lines")
        return 1
    print(table(rows))
    for line in goal_lines(rows) + layer_lines(rows):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
