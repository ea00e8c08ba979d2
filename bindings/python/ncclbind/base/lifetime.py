"""The end of what ncclbind owns for the caller (a communicator, an NCCL EP group, handle or tensor):
a with block destroys it, and one collected while it still holds its handle warns (ResourceWarning),
naming itself: NCCL's resources are collective or device-side, so the collector cannot end them."""
from __future__ import annotations

import warnings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Self


class Destroyable:
    """A base for owners: `_OWNED` names the attribute that holds the handle (0 once destroyed);
    the class defines destroy(). Listed last among the bases, so a class's own __exit__ (the
    Communicator aborts after an exception) comes first."""

    __slots__ = ()
    _OWNED = "_handle"

    def destroy(self) -> None:  # each owner's own
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def __del__(self) -> None:
        if getattr(self, self._OWNED, 0):  # absent when __init__ failed before setting it
            warnings.warn(f"{self!r} was not destroyed; call destroy() or use a with block", ResourceWarning,
                          stacklevel=2)
