"""The reduce and copy functions of the device API on cute.Tensor operands.

Each C-ABI family has one function per element type (ncclLsaReduceSum_F32, ...); the tensor's
element type picks it, found in the IR by the C type of its element pointer. Window operands
are a Window and a tensor inside it (Window.tensor): the byte offset is the tensor's address
less the window's. `count` is in elements."""
from __future__ import annotations

from typing import Any

import cutlass

from .._generated import cute as _d
from ..._generated.vocabulary import DEVICE_ELEMENTS
from .. import ir_tables
from ..cute_ffi import to_ptr
from .gin import _offset

__all__ = ["lsa_reduce_sum", "multimem_reduce_sum", "lsa_copy", "multimem_copy", "lsa_reduce_sum_copy",
           "multimem_reduce_sum_copy", "local_reduce_sum_copy"]

# The C element type of each CuTe numeric type (how the C ABI spells it): the IR then says which
# family member takes it.
# CuTe DSL numeric type name -> the C type of the C ABI's per-type families, as
# policy/vocabulary.toml states it (cute, c_element).
_C_ELEMENT = {cute: c_element for _, c_element, cute_names in DEVICE_ELEMENTS for cute in cute_names}


def _function(family: str, element: Any) -> Any:
    """The family's C-ABI function for tensors of `element` (a cutlass numeric type)."""
    name = getattr(element, "__name__", str(element))
    return getattr(_d, ir_tables.reduce_copy_member(family, _C_ELEMENT.get(name), f"{name} tensors"))


def _address(tensor: Any) -> Any:
    return to_ptr(tensor.iterator.toint(), "tensor")


def lsa_reduce_sum(coop, src_window, src, dst, count, *, team) -> None:
    """dst[:count] = the sum over `team`'s ranks of their `src` in `src_window`."""
    _function("ncclLsaReduceSum", src.element_type)(coop, src_window.ptr, _offset(src_window, src), _address(dst),
                                                    cutlass.Uint64(count), team)


def multimem_reduce_sum(coop, mc_src, dst, count) -> None:
    """dst[:count] = the sum over the multicast group of `mc_src` (a multimem tensor)."""
    _function("ncclMultimemReduceSum", mc_src.element_type)(coop, _address(mc_src), _address(dst),
                                                            cutlass.Uint64(count))


def lsa_copy(coop, src, dst_window, dst, count, *, team) -> None:
    """src[:count] into `dst` of `dst_window` on every rank of `team`."""
    _function("ncclLsaCopy", src.element_type)(coop, _address(src), dst_window.ptr, _offset(dst_window, dst),
                                               cutlass.Uint64(count), team)


def multimem_copy(coop, src, mc_dst, count) -> None:
    """src[:count] into the multicast tensor `mc_dst` (every rank of its group)."""
    _function("ncclMultimemCopy", src.element_type)(coop, _address(src), _address(mc_dst), cutlass.Uint64(count))


def lsa_reduce_sum_copy(coop, src_window, src, dst_window, dst, count, *, team) -> None:
    """The sum over `team` of `src` in `src_window` into `dst` of `dst_window` on every rank of it."""
    _function("ncclLsaReduceSumCopy", src.element_type)(coop, src_window.ptr, _offset(src_window, src),
                                                        dst_window.ptr, _offset(dst_window, dst),
                                                        cutlass.Uint64(count), team)


def multimem_reduce_sum_copy(coop, mc_src, mc_dst, count) -> None:
    """The multicast sum of `mc_src` into the multicast tensor `mc_dst`."""
    _function("ncclMultimemReduceSumCopy", mc_src.element_type)(coop, _address(mc_src), _address(mc_dst),
                                                                cutlass.Uint64(count))


def local_reduce_sum_copy(coop, n_src, src_base, src_displ, n_dst, dst_base, dst_displ, count) -> None:
    """The sum of the `n_src` local buffers src_base + i * src_displ (bytes) into each of the
    `n_dst` buffers dst_base + j * dst_displ."""
    _function("ncclLocalReduceSumCopy", src_base.element_type)(coop, n_src, _address(src_base), src_displ, n_dst,
                                                               _address(dst_base), dst_displ, cutlass.Uint64(count))
