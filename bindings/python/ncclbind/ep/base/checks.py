"""What the checks of ncclbind.ep share, and no rule of its own: each rule of
policy/nccl_ep.toml is its own generated code (ep/_generated/checks.py: a function per
tensor rule, record, set of limits, precondition and token-row rule), and each method its own
sequence of them (ep/_generated/methods.py: owner state, preconditions, enums, the routing's
symbols, every argument in the C call's order, the token-row bytes, then invoke() and what the
call makes). Here: the refusals those checks raise (NcclInvalid naming the argument), the checks
of one argument that no rule describes (a config record, a host array, a communicator, an
argument that is None), the call of a raw NCCL EP function, and what a failure of it says.

Symbols: a group's (nranks, its config's fields, their quotients) are fixed when it is made; a
handle's (num_tokens, top_k) when its routing is given (create_handle, update); a call's (hidden,
num_recv_slots, ...) are bound by the first tensor of the call that has them, and every later
tensor of the call must agree.

Preconditions: a state of the group a method needs where NCCL EP would assert it (and so end the
process): a Group keeps the set of preconditions it meets (met_at_creation, then satisfied_by_<method>
after each successful set_by method), and a method that requires one it lacks raises NcclInvalid
naming the method and the precondition, before any argument is resolved.

Kernel headers: libnccl_ep compiles its kernels at run time against $NCCL_HOME/include, which
must hold the NCCL release its host code was built with (the runtime checks it when libnccl_ep
loads; kernel_headers() reports what it found). Group creation refuses a NCCL_HOME of another
release (MISMATCH) before NCCL EP is called; when NCCL_HOME is unset with no matching home to
set it to (UNSET), an ncclInternalError of an EP call carries the runtime's message as a hint.

Stale last errors: NCCL EP sets no error text of its own, so a failed EP call carries NCCL's
last-error text, one per process that every NCCL warning overwrites (on 2x H200, the GDRCopy
warning of ncclEpCreateGroup). It is read once after each group or handle is made; a failed call
whose text is still that one says so, with last_error_stale = True (False for a fresh text)."""
from __future__ import annotations

import enum
from array import array

from ... import _nccl
from ...errors import (INVALID_ARGUMENT, LIBRARY_NOT_FOUND, STATE, SYMBOL_NOT_FOUND, TIMEOUT, NcclError,
                      NcclInternalError, NcclInvalid)
from ...nccl_enums import NcclDataType
from .records import int_value
from .tensor import as_tensor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any

# Exceptions raised inside AllocConfig's Python callbacks while NCCL EP ran (allocator.py): the
# running call raises them when NCCL EP returns.
pending: list = []

# NCCL's last-error text right after the last EP group or handle was made (made()), or None.
_made_last_error: str | None = None
# The codes whose last_error is the ncclbind runtime's own message, not NCCL's.
_RUNTIME_CODES = frozenset((LIBRARY_NOT_FOUND, SYMBOL_NOT_FOUND, INVALID_ARGUMENT, STATE, TIMEOUT))

# The mode prefix of each algorithm (ncclEpAlgorithm_t value -> the spec's ll / ht).
ALGORITHMS = {0: "ll", 1: "ht"}


class KernelHeaders(enum.IntEnum):
    """Whether NCCL_HOME holds the NCCL headers libnccl_ep's run-time kernel compiles need (the
    runtime's ncclbind_kernel_headers, decided when libnccl_ep loaded)."""

    UNKNOWN = _nccl.KERNEL_HEADERS_UNKNOWN    # no release registered for this libnccl_ep version
    MATCH = _nccl.KERNEL_HEADERS_MATCH        # NCCL_HOME holds the release's headers
    MISMATCH = _nccl.KERNEL_HEADERS_MISMATCH  # the user's NCCL_HOME holds another release's (or none readable)
    UNSET = _nccl.KERNEL_HEADERS_UNSET        # NCCL_HOME unset, no matching home to set: kernel compiles fail


def kernel_headers() -> tuple[KernelHeaders, str]:
    """(status, message): whether NCCL_HOME holds the NCCL release libnccl_ep's kernels need; the
    message names libnccl_ep's version, that release, NCCL_HOME and the release there, and the fix.
    Loads libnccl_ep if needed (if it cannot load: UNKNOWN, with the load error)."""
    status, message = _nccl.kernel_headers(_nccl.LIB_NCCL_EP)
    return KernelHeaders(status), message


def made() -> None:
    """A group or handle was made: NCCL's last-error text now is one no later call set."""
    global _made_last_error
    _made_last_error = _nccl.nccl_last_error()


def failed(error: BaseException, makes: bool = False) -> None:
    """In a call's except block: a callback's exception is the one raised (NCCL EP's error, if
    any, as its cause); else the caller re-raises `error`, an ncclInternalError with the kernel
    headers' message added when NCCL_HOME was left unset (the likely cause: a kernel compile).
    An NCCL failure of a call that `makes` no group or handle says when NCCL's last-error text is
    the one it held after the last was made (last_error_stale; last_error keeps the text)."""
    if isinstance(error, NcclError) and error.code not in _RUNTIME_CODES:
        text = error.last_error
        error.last_error_stale = stale = (not makes and bool(text) and text == _made_last_error
                                          and bool(error.args) and error.args[0].endswith(f": {text}"))
        if stale:
            error.args = (f"{error.args[0][:-len(text) - 2]}: NCCL EP gave no reason; NCCL's last error is "
                          f"unchanged since the last EP group or handle was made, so it is likely not this "
                          f"call's: \"{text}\"", *error.args[1:])
    if pending:
        callback_error = pending.pop(0)
        pending.clear()
        raise callback_error from error
    if isinstance(error, NcclInternalError) and error.args:
        status, message = kernel_headers()
        if status is KernelHeaders.UNSET:
            error.args = (f"{error.args[0]}\nhint: {message}", *error.args[1:])


def raise_pending() -> None:
    """After a call that returned: raise what a callback raised during it."""
    error = pending.pop(0)
    pending.clear()
    raise error


def mode_of(algorithm: int, layout: int, modes: tuple, argument: str = "layout") -> str:
    """The mode (ll_expert_major, ...) of an algorithm and a layout, one of `modes` (the spec's);
    a layout the algorithm lacks raises NcclInvalid naming `argument`."""
    from ...nccl_ep_enums import NcclEpLayout
    name = NcclEpLayout(layout).name.lower()
    mode = f"{ALGORITHMS.get(algorithm, '?')}_{name}"
    if mode not in modes:
        fitting = [m.split("_", 1)[1].upper() for m in modes if m.startswith(ALGORITHMS.get(algorithm, "?") + "_")]
        raise NcclInvalid(f"{argument}: {name.upper()} is not a layout of the group's "
                          f"{ALGORITHMS.get(algorithm, algorithm).upper()} algorithm (it has {', '.join(fitting)})",
                          argument)
    return mode


# ---- The refusals of the generated rule checks (ep/_generated/checks.py) -----------------------

def over_limit(argument: str, problem: str, doc: str) -> NcclInvalid:
    return NcclInvalid(f"{argument}: {problem} ({doc})", argument)


def not_in_mode(argument: str, mode: str, modes: str) -> NcclInvalid:
    return NcclInvalid(f"{argument}: not used in {mode} (only in {modes}); pass None", argument)


def wrong_dtype(argument: str, name: str, expected: str, where: str, doc: str) -> NcclInvalid:
    return NcclInvalid(f"{argument}: dtype {name}, expected {expected}{where} ({doc})", argument)


def wrong_rank(argument: str, shape: tuple, rank: int, wanted: str, doc: str) -> NcclInvalid:
    return NcclInvalid(f"{argument}: {len(shape)}-D tensor of shape {list(shape)}, expected {rank}-D {wanted} ({doc})",
                       argument)


def wrong_extent(argument: str, shape: tuple, wanted: str, index: int, dim: str, value: int) -> NcclInvalid:
    return NcclInvalid(f"{argument}: shape {list(shape)}, expected {wanted}: extent {index} is {shape[index]}, "
                       f"but {dim} = {value}", argument)


def wrong_device(argument: str, device: int, group_device: int) -> NcclInvalid:
    return NcclInvalid(f"{argument} is on CUDA device {device}, the EP group on device {group_device}", argument)


def field_tensor(tensor: Any, argument: str, field: str, required: bool, doc: str) -> Any:
    """A record's tensor field: None where it is not given (refused where it is required), refused
    where it is a destroyed DevTensor."""
    if tensor is None:
        if required:
            raise NcclInvalid(f"{argument}.{field} is required ({doc})", f"{argument}.{field}")
        return None
    if type(tensor).__name__ == "DevTensor" and tensor.closed:
        raise NcclInvalid(f"{argument}.{field}: the DevTensor was destroyed", f"{argument}.{field}")
    return tensor


def row_term(tensors: Any, argument: str, field: str, per: int, dtype: NcclDataType | None) -> tuple:
    """One part of a token row in transit: (its tensor's name, its bytes, how they were counted),
    or (name, 0, None) where the tensor is not given: the last extent of tensors.field, divided by
    `per` (rounded up), in elements of `dtype` (None: the tensor's own)."""
    tensor = None if tensors is None else tensors._tensors[field]
    if tensor is None:
        return f"{argument}.{field}", 0, None
    extent = tensor.shape[-1]
    elements = -(-extent // per)
    element = tensor.dtype if dtype is None else dtype
    count = str(extent) if per == 1 else f"{extent} / {per} = {elements}"
    return (f"{argument}.{field}", elements * element.itemsize,
            f"{argument}.{field} {count} x {element.dtype_name} ({element.itemsize} B)")


def row_bytes(recipe: str, budget: int, budget_name: str, doc: str, terms: tuple) -> None:
    """A token row of `terms` (row_term's) at most `budget`; a refusal names the first term's tensor."""
    total = sum(term[1] for term in terms)
    if total > budget:
        argument = terms[0][0]
        parts = " + ".join(term[2] for term in terms if term[2] is not None)
        raise NcclInvalid(f"{argument}: token row bytes = {total} is above {budget_name} = {budget} "
                          f"({recipe}: {parts}; {doc})", argument)


def unmet(group: Any, method: str, name: str, doc: str, algorithms: tuple | None, config: str | None,
          set_by: tuple) -> NcclInvalid:
    """The refusal of a method whose group lacks precondition `name`, saying why it lacks it."""
    if group._config is None:
        return NcclInvalid(f"{method} needs {doc} (precondition {name}); this group was adopted from a "
                           f"raw ncclEpGroup_t without its GroupConfig: make it with Group(ptr, comm=..., "
                           f"config=...) to say what it has", "group")
    algorithm = ALGORITHMS.get(group._algorithm, str(group._algorithm))
    if algorithms is not None and algorithm not in algorithms:
        state = f"is {algorithm.upper()}"
    else:
        parts = []
        if config is not None:
            parts.append(f"has GroupConfig.{config} = {group._config._values[config]}")
        if set_by:
            parts.append(f"no {' or '.join(set_by)} has succeeded on it")
        state = " and ".join(parts)
    return NcclInvalid(f"{method} needs {doc} (precondition {name}); this group {state}", "group")


def check_config(value: Any, cls: type, argument: str, optional: bool, keep: list | None = None) -> int:
    """A config argument (an instance of cls): its positive fields; its address (the config kept).
    None, or 0 (nccl.ep's spelling of NULL), is the library's defaults where it is optional."""
    class_name = cls.__name__
    if value is None or (type(value) is int and value == 0):
        if optional:
            return 0
        raise NcclInvalid(f"{argument} is required (an ep.{class_name})", argument)
    if type(value) is int:
        raise NcclInvalid(f"{argument}: {value:#x} is an address; pass an ep.{class_name} (or 0 or None for the "
                          f"library's defaults)", argument)
    if type(value) is not cls:
        raise NcclInvalid(f"{argument}: {type(value).__name__} is not an ep.{class_name}", argument)
    low = value.positive_failures()
    if low:
        raise NcclInvalid(f"{argument}: {', '.join(low)} must be above 0 (required)", argument)
    if keep is not None:
        keep.append(value)
    return value.address


def _host_array(value: Any, argument: str, length: int, size: int, signed: bool) -> array:
    try:
        items = list(value)
    except TypeError:
        raise NcclInvalid(f"{argument}: {type(value).__name__} is not a sequence of ints", argument) from None
    if len(items) != length:
        raise NcclInvalid(f"{argument}: {len(items)} values, expected {length} (one per rank)", argument)
    bits = size * 8
    bounds = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    for i, item in enumerate(items):
        int_value(item, f"{argument}[{i}]", bounds)
    code = {(4, True): "i", (4, False): "I", (8, True): "q", (8, False): "Q"}[(size, signed)]
    return array(code, items)


def dead(owner: Any, method: str) -> NcclInvalid:
    what = "group" if type(owner).__name__ == "Group" else "handle"
    return NcclInvalid(f"{method}: the EP {what} was destroyed", what)


class Checked:
    """What a generated method's checks give its call: the C call's arguments (outs left out), the
    objects NCCL EP may use until the handle goes (keep), and the call's layout, mode and symbols."""

    __slots__ = ("c_args", "keep", "layout", "mode", "symbols")

    def __init__(self, c_args: tuple, keep: list, layout: int | None, mode: str | None, symbols: dict) -> None:
        self.c_args, self.keep, self.layout, self.mode, self.symbols = c_args, keep, layout, mode, symbols


def tensor_argument(value: Any, argument: str, check: Any, optional: bool, doc: str, symbols: dict,
                    mode: str | None, device: int | None, method: str, keep: list) -> Any:
    """A tensor argument (torch, CuPy, DLPack, ep.Tensor, ep.DevTensor) resolved and checked by
    `check` (its rule's generated check); None where it is optional (else a named refusal)."""
    if value is None:
        if not optional:
            raise NcclInvalid(f"{argument} is required ({doc})", argument)
        return None
    tensor = as_tensor(value, argument)
    check(tensor, argument, symbols, mode, device, method)
    keep.append(tensor)
    return tensor


def tensor_set_argument(value: Any, check: Any, class_name: str, argument: str, optional: bool, symbols: dict,
                        mode: str | None, device: int | None, method: str, keep: list) -> int:
    """A tensor-set argument (DispatchInputs, ...) checked by `check` (its record's generated
    check): its address, 0 for None where it is optional."""
    if value is None:
        if optional:
            return 0
        raise NcclInvalid(f"{argument} is required (an ep.{class_name})", argument)
    address = check(value, argument, symbols, mode, device, method)
    keep.append(value)
    return address


def host_array(value: Any, argument: str, length: int, size: int, signed: bool, keep: list) -> int:
    """A host array of `length` C integers of `size` bytes from a sequence: its address (kept)."""
    values = _host_array(value, argument, length, size, signed)
    keep.append(values)
    return values.buffer_info()[0]


def communicator(comm: Any, cls: type) -> int:
    """A create method's communicator (an instance of cls: ncclbind.Communicator, or the generated
    class it completes): its ncclComm_t, refused naming comm if it is not a live one."""
    if not isinstance(comm, cls):
        raise NcclInvalid(f"comm: {type(comm).__name__} is not an ncclbind.Communicator", "comm")
    if comm.closed:
        raise NcclInvalid("comm: the communicator was destroyed or aborted", "comm")
    return comm.handle


def refuse_mismatched_kernel_headers() -> None:
    """Before a group is made: a NCCL_HOME of another release than libnccl_ep's is refused."""
    status, message = kernel_headers()
    if status is KernelHeaders.MISMATCH:
        raise NcclInvalid(message, "NCCL_HOME")


def invoke(function: Any, c_args: tuple, makes: bool = False) -> Any:
    """Call a raw NCCL EP function; a callback's exception, a stale last error and the kernel
    headers' hint as failed() says; a callback's exception after a success is raised too."""
    try:
        result = function(*c_args)
    except BaseException as error:
        failed(error, makes)
        raise
    if pending:
        raise_pending()
    return result
