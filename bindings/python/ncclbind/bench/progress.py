"""A one-line progress bar on stderr for sweeps: shown when stderr is a terminal (or when
forced with --progress always), never mixed into stdout's tables."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, mode: str = "auto", stream=None, min_seconds: float = 2.0):
        self.stream = stream or sys.stderr
        self.total, self.done, self.label = max(total, 1), 0, ""
        self.enabled = mode == "always" or (mode == "auto" and self.stream.isatty())
        self.start, self.shown = time.monotonic(), False
        self.min_seconds = 0.0 if mode == "always" else min_seconds

    def advance(self, label: str = "", steps: int = 1) -> None:
        self.done, self.label = min(self.total, self.done + steps), label or self.label
        self._draw()

    def _draw(self) -> None:
        # Only sweeps longer than a few seconds get a bar (forced ones always do).
        elapsed = time.monotonic() - self.start
        if not self.enabled or (not self.shown and elapsed < self.min_seconds and self.done < self.total):
            return
        width = 30
        filled = int(width * self.done / self.total)
        self.stream.write("\r[%s%s] %3d%% %s %.0fs\033[K" % ("#" * filled, "." * (width - filled),
                                                            100 * self.done // self.total, self.label[:40], elapsed))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
