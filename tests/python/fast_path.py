"""Which path a fast-path method's call took, observed through ncclbind._nccl._set_path_observer:
the extension counts nothing itself, so the tests that ask keep their own log."""
from __future__ import annotations


class PathLog:
    """While entered: every call of a fast-path method or prepared call, (method, made in C)."""

    def __init__(self):
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, method: str, made: bool) -> None:
        self.calls.append((method, made))

    def __enter__(self) -> "PathLog":
        from ncclbind import _nccl
        self.previous = _nccl._set_path_observer(self)
        return self

    def __exit__(self, *exc) -> None:
        from ncclbind import _nccl
        _nccl._set_path_observer(self.previous)

    def counts(self, method: str) -> tuple[int, int]:
        """(calls of `method` made in C, calls given to its Python definition)."""
        made = sum(1 for m, in_c in self.calls if m == method and in_c)
        return made, sum(1 for m, _ in self.calls if m == method) - made
