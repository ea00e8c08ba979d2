"""Compile-only kernel arguments: a DevComm, Window or handle placeholder for cute.compile before
any communicator exists (as cutlass.cute.runtime.make_fake_stream is for a stream).

A placeholder carries the view's MLIR type and no data (no __c_pointers__): it is only a
cute.compile argument; call the compiled kernel with the real resources."""
from __future__ import annotations

from typing import ClassVar, cast

from .comm import DevComm
from .handles import GinBarrierHandle, LsaBarrierHandle, MultimemHandle
from .window import Window

__all__ = ["make_fake_dev_comm", "make_fake_gin_barrier_handle", "make_fake_lsa_barrier_handle",
           "make_fake_multimem_handle", "make_fake_window"]


class _Placeholder:
    """A type-only argument: the CuTe DSL checks an argument against its parameter's annotation
    (isinstance) before anything else, so it reports the view's class."""

    _view: ClassVar[type]

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return self._view

    def __get_mlir_types__(self):
        return self._view.__get_mlir_types__()

    def __new_from_mlir_values__(self, values):
        return self._view.__new_from_mlir_values__(object.__new__(self._view), values)

    def __repr__(self) -> str:
        return f"<compile-only {self._view.__name__}>"


def _placeholder(view: type):
    return type(f"_Fake{view.__name__}", (_Placeholder,), {"_view": view})()


def make_fake_dev_comm() -> DevComm:
    """A compile-only DevComm (the loaded release's ncclDevComm layout)."""
    return cast(DevComm, _placeholder(DevComm))


def make_fake_window() -> Window:
    """A compile-only Window."""
    return cast(Window, _placeholder(Window))


def make_fake_multimem_handle() -> MultimemHandle:
    """A compile-only MultimemHandle."""
    return cast(MultimemHandle, _placeholder(MultimemHandle))


def make_fake_lsa_barrier_handle() -> LsaBarrierHandle:
    """A compile-only LsaBarrierHandle."""
    return cast(LsaBarrierHandle, _placeholder(LsaBarrierHandle))


def make_fake_gin_barrier_handle() -> GinBarrierHandle:
    """A compile-only GinBarrierHandle."""
    return cast(GinBarrierHandle, _placeholder(GinBarrierHandle))
