"""ncclbind.ep: NCCL EP (expert-parallel dispatch and combine for MoE layers) for Python.

    from ncclbind import ep
    config = ep.GroupConfig(algorithm="low_latency", num_experts=256, max_dispatch_tokens_per_rank=128,
                            max_token_bytes=7168 * 2)
    with ep.Group.create(comm, config) as group:
        handle = group.create_handle("expert_major", topk_idx)            # torch int64 [tokens, top_k]
        inputs = ep.DispatchInputs(tokens, topk_weights=weights)          # resolved once
        outputs = ep.DispatchOutputs(recv)                                 # [local experts, ranks x max, hidden]
        handle.dispatch(inputs, outputs, layout_info=ep.LayoutInfo(expert_counters=counts))
        handle.combine(ep.CombineInputs(expert_out), ep.CombineOutputs(out, topk_weights=weights))
        step = ep.prepare(handle.dispatch, inputs, outputs)               # checked once; step() per step

The methods, their checks and the classes are generated from policy/nccl_ep.toml (the
same policy the Rust layer renders from); ncclbind._nccl_ep has every raw function. See docs/ep.md.

It is nccl-extensions 0.1.0's nccl.ep as well (names, keywords, defaults, enum members): a program
written for `import nccl.ep` runs with `import ncclbind.ep` instead.
"""
from __future__ import annotations

from pathlib import Path

from ._generated.classes import (CombineConfig, CombineInputs, CombineOutputs, CompleteConfig, DispatchConfig,
                                     DispatchInputs, DispatchOutputs, GroupConfig, HandleConfig, LayoutInfo,
                                     TensorAllocConfig)
from ._generated.methods import get_version
from ..nccl_ep_enums import NcclEpAlgorithm as Algorithm
from ..nccl_ep_enums import NcclEpCombQuant as CombineQuantizationRecipe
from ..nccl_ep_enums import NcclEpDispQuant as DispatchQuantizationRecipe
from ..nccl_ep_enums import NcclEpExpertIdKind as ExpertIdKind
from ..nccl_ep_enums import NcclEpLayout as Layout
from ..nccl_ep_enums import NcclEpOverflowPolicy as OverflowPolicy
from ..nccl_ep_enums import NcclEpPassDir as PassDir
from ..nccl_ep_enums import NcclEpZeroCopyMode as ZeroCopyMode
from .base.allocator import AllocConfig, AllocFn, FreeFn
from .base.checks import KernelHeaders, kernel_headers
from .base.tensor import Tensor
from .group import Group, Handle
from .prepared import PreparedStep, prepare
from .tensor import DevTensor

from ..core.versions import Version

__all__ = ["Algorithm", "AllocConfig", "AllocFn", "CombineConfig", "CombineInputs", "CombineOutputs",
           "CombineQuantizationRecipe", "CompleteConfig", "DevTensor", "DispatchConfig", "DispatchInputs",
           "DispatchOutputs", "DispatchQuantizationRecipe", "ExpertIdKind", "FreeFn", "Group", "GroupConfig", "Handle",
           "HandleConfig", "KernelHeaders", "Layout", "LayoutInfo", "OverflowPolicy", "PassDir", "PreparedStep",
           "Tensor", "TensorAllocConfig", "ZeroCopyMode", "get_lib_path", "get_lib_version", "get_version",
           "kernel_headers", "prepare"]


def get_lib_version() -> Version:
    """The loaded libnccl_ep's release, e.g. Version(0, 2, 0) (prints "0.2.0"; a tuple, so ordered):
    ncclEpGetVersion's code (get_version()) decoded. Loads libnccl_ep; NcclError if it cannot."""
    return Version.from_code(get_version(), "nccl_ep")


def get_lib_path() -> Path | None:
    """The path of the loaded libnccl_ep (None if the runtime could not tell). Loads libnccl_ep;
    NcclError if it cannot."""
    from .. import _nccl
    path = _nccl.library_info(_nccl.LIB_NCCL_EP)["path"]
    return Path(path) if path else None
