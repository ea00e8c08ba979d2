"""ncclbind.ep.prepare: one call of a handle's per-step method (dispatch, combine, complete),
checked and resolved now, made again by each call of the PreparedStep it returns, in C with no
argument handling: the MoE decode loop that calls dispatch and combine with the same records on
every step pays only for calling NCCL EP. The Python analogue of ncclbind.prepare for a
communicator's collectives."""
from __future__ import annotations

import functools
import inspect

from .. import _nccl
from ._generated.methods import STEPS
from .base import checks
from ..errors import NcclInvalid
from .group import Handle

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Callable, ParamSpec

    P = ParamSpec("P")

PreparedStep = _nccl.PreparedStep


def prepare(method: Callable[P, None], /, *args: P.args, **kwargs: P.kwargs) -> PreparedStep:
    """One call of an ep.Handle's per-step method (handle.dispatch, handle.combine or
    handle.complete), bound and checked now as calling `method(*args, **kwargs)` would check it,
    without calling NCCL EP; the PreparedStep it returns makes that call each time it is called
    (no arguments). It keeps the records, their tensors and the handle alive. While the handle
    keeps the routing it had here, a call is NCCL EP's function with the C arguments resolved now
    (the stream included); after handle.update() or destroy() it goes to the method with the
    original arguments, which checks them against the new routing and raises or runs. Errors are
    the method's: an NCCL EP failure raises the same NcclError, an AllocConfig callback's
    exception is raised by the call that ran it."""
    owner = getattr(method, "__self__", None)
    func = getattr(method, "__func__", None)
    name = getattr(func, "__name__", "")
    definition, raw, check = STEPS.get(name, (None, None, None))
    if not isinstance(owner, Handle) or definition is None or func not in (definition, getattr(Handle, name)):
        steps = ", ".join(f"handle.{step}" for step in STEPS)
        raise NcclInvalid(f"method: a per-step method of an ep.Handle, bound to it ({steps}), not {method!r}",
                          "method")
    bound = inspect.signature(definition).bind(owner, *args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    del values[next(iter(values))]  # self
    stream = values.pop("stream")
    token = owner._routing
    if token is None:
        raise checks.dead(owner, name)
    checked = check(owner, *values.values(), stream)
    # while the handle keeps this routing, NCCL EP's function with these C arguments; after
    # update or destroy, the method itself with the original arguments
    return _nccl._prepare_step(raw, checked.c_args, owner, "_routing", token, functools.partial(method, *args, **kwargs),
                               checks.failed, checks.pending, checks.raise_pending, name,
                               (checked.keep, tuple(values.values())))
