"""The checks of ncclbind.ep, by the rules of generator/spec/nccl_ep.toml (as data in
_generated/ep_spec.py): every argument of an EP call is resolved and checked here before NCCL EP
is called (type, enum value, int range, tensor dtype, rank, shape by mode, device, the limits
between the group's, the routing's and the call's dimensions, a token row's bytes in transit
against the group's max_token_bytes), and a refusal raises NcclInvalid naming the argument. These
are the checks of one argument, one rule or one state; the generated methods
(_generated/ep_methods.py) are each their own sequence of them, rendered from the method's
[methods] entry: owner state, preconditions, enums, the routing's symbols, every argument in the
C call's order, the token-row bytes, then invoke() and what the call makes.

Symbols: a group's (nranks, its config's fields, their quotients) are fixed when it is made; a
handle's (num_tokens, top_k) when its routing is given (create_handle, update); a call's (hidden,
num_recv_slots, ...) are bound by the first tensor of the call that has them, and every later
tensor of the call must agree.

Preconditions: a state of the group a method needs where NCCL EP would assert it (and so end the
process): a Group keeps the set of preconditions it meets (met_at_creation, then satisfied()
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
from ..._generated.ep_spec import LIMITS, MODES, PRECONDITIONS, RECORDS, ROW_BYTES, SYMBOLS, TENSOR_RULES
from ..streams import stream_handle
from ...errors import (INVALID_ARGUMENT, LIBRARY_NOT_FOUND, STATE, SYMBOL_NOT_FOUND, TIMEOUT, NcclError,
                      NcclInternalError, NcclInvalid)
from ...nccl_enums import NcclDataType
from .records import enum_value, int_value
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
_ALGORITHMS = {0: "ll", 1: "ht"}


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


def mode_of(algorithm: int, layout: int, argument: str = "layout") -> str:
    """The spec's mode (ll_expert_major, ...) of an algorithm and a layout; a layout the
    algorithm lacks raises NcclInvalid naming `argument`."""
    from ...nccl_ep_enums import NcclEpLayout
    name = NcclEpLayout(layout).name.lower()
    mode = f"{_ALGORITHMS.get(algorithm, '?')}_{name}"
    if mode not in MODES:
        fitting = [m.split("_", 1)[1].upper() for m in MODES if m.startswith(_ALGORITHMS.get(algorithm, "?") + "_")]
        raise NcclInvalid(f"{argument}: {name.upper()} is not a layout of the group's "
                          f"{_ALGORITHMS.get(algorithm, algorithm).upper()} algorithm (it has {', '.join(fitting)})",
                          argument)
    return mode


def group_symbols(nranks: int | None, config: Any) -> dict:
    """The group's symbols from its communicator and config (those known: a group adopted from a
    raw pointer may lack either); its limits checked (naming config)."""
    symbols: dict = {}
    for name, s in SYMBOLS.items():
        if s["source"] == "nranks" and nranks is not None:
            symbols[name] = nranks
        elif s["source"] == "group_config" and config is not None:
            symbols[name] = config._values[s["field"]]
    check_limits(symbols, set(symbols), "config")
    for name, s in SYMBOLS.items():
        if s["source"] == "quotient":
            a, b = (symbols.get(x) for x in s["of"])
            if a is not None and b:
                symbols[name] = a // b
    return symbols


def check_limits(symbols: dict, new: set, argument: str, mode: str | None = None, method: str | None = None) -> None:
    """Every limit that involves a symbol of `new`, whose sides are known and that holds in this
    mode and method (a limit scoped to modes or methods is skipped where either is not known)."""
    for symbol, kind, bound, doc, modes, methods in LIMITS:
        constant = type(bound) is int
        if symbol not in new and (constant or bound not in new):
            continue
        if (modes is not None and mode not in modes) or (methods is not None and method not in methods):
            continue
        value = symbols.get(symbol)
        limit = bound if constant else symbols.get(bound)
        if value is None or limit is None:
            continue
        if kind == "at_most" and value > limit:
            problem = f"{symbol} = {value} is above {bound} = {limit}"
        elif kind == "at_least" and value < limit:
            problem = f"{symbol} = {value} is below {limit}"
        elif kind == "multiple_of" and (limit == 0 or value % limit):
            problem = f"{symbol} = {value} is not a multiple of {limit if constant else f'{bound} = {limit}'}"
        else:
            continue
        raise NcclInvalid(f"{argument}: {problem} ({doc})", argument)


def check_row_bytes(name: str, given: dict, symbols: dict) -> None:
    """Method `name`'s [[row_bytes]] rules: a token row in transit, as the recipe its config
    selects makes it (the element sizes: NcclDataType's), at most the group's budget; a refusal
    names the tensor of the rule's first term. Skipped where the budget is not known (a group
    adopted without its config) or the recipe has no row in the spec."""
    for rule in ROW_BYTES.get(name, ()):
        budget = symbols.get(rule["at_most"])
        if budget is None:
            continue
        config = given[rule["config"]]
        recipe = 0 if config is None or type(config) is int else int(config._values[rule["field"]])
        found = rule["recipes"].get(recipe)
        if found is None:
            continue
        recipe_name, terms = found
        total, parts = 0, []
        for argument, field, per, dtype in terms:
            tensors = given[argument]
            tensor = None if tensors is None else tensors._tensors[field]
            if tensor is None:
                continue
            extent = tensor.shape[-1]
            elements = -(-extent // per)
            element = tensor.dtype if dtype is None else NcclDataType.from_dtype(dtype)
            total += elements * element.itemsize
            count = str(extent) if per == 1 else f"{extent} / {per} = {elements}"
            parts.append(f"{argument}.{field} {count} x {element.dtype_name} ({element.itemsize} B)")
        if total > budget:
            argument = f"{terms[0][0]}.{terms[0][1]}"
            raise NcclInvalid(f"{argument}: token row bytes = {total} is above {rule['at_most']} = {budget} "
                              f"({rule['config']}.{rule['field']} {recipe_name}: {' + '.join(parts)}; {rule['doc']})",
                              argument)


def _shape_for(rule: dict, mode: str | None):
    shapes = rule["shape"]
    keys = ("any",) if mode is None else (mode, mode.split("_", 1)[0], "any")
    for key in keys:
        if key in shapes:
            return shapes[key]
    return None


def _dtypes_for(rule: dict, mode: str | None) -> list:
    """The element types in `mode`, looked up as the shape is; no mode (a call without a layout)
    or a mode the table lacks: every type the table names."""
    table = rule["dtypes"]
    if mode is not None:
        for key in (mode, mode.split("_", 1)[0], "any"):
            if key in table:
                return table[key]
    return list(dict.fromkeys(name for names in table.values() for name in names))


def _dim_value(dim: list, symbols: dict):
    kind = dim[0]
    if kind == "int":
        return dim[1]
    if kind == "sym":
        return symbols.get(dim[1])
    if kind == "mul":
        a, b = _dim_value(dim[1], symbols), _dim_value(dim[2], symbols)
        return None if a is None or b is None else a * b
    return None


def _dim_text(dim: list) -> str:
    return {"int": lambda: str(dim[1]), "sym": lambda: dim[1], "any": lambda: "*",
            "mul": lambda: f"{_dim_text(dim[1])} * {_dim_text(dim[2])}"}[dim[0]]()


def check_tensor(tensor: Any, rule: dict, argument: str, symbols: dict, mode: str | None, device: int | None,
                 method: str | None = None) -> None:
    """One EP tensor against its rule: allowed in the mode, dtype, rank, every extent (binding
    the call's symbols it is the first to give, and checking their limits in `method`), and the
    group's device."""
    if rule["modes"] is not None and mode is not None and mode not in rule["modes"]:
        raise NcclInvalid(f"{argument}: not used in {mode} (only in {', '.join(rule['modes'])}); pass None",
                          argument)
    name = tensor.dtype.dtype_name
    dtypes = _dtypes_for(rule, mode)
    if name not in dtypes:
        where = f" in {mode}" if mode is not None and set(rule["dtypes"]) != {"any"} else ""
        raise NcclInvalid(f"{argument}: dtype {name}, expected {' or '.join(dtypes)}{where} ({rule['doc']})",
                          argument)
    shape = _shape_for(rule, mode)
    if shape is not None:
        wanted = "[" + ", ".join(_dim_text(d) for d in shape) + "]"
        if len(tensor.shape) != len(shape):
            raise NcclInvalid(f"{argument}: {len(tensor.shape)}-D tensor of shape {list(tensor.shape)}, expected "
                              f"{len(shape)}-D {wanted} ({rule['doc']})", argument)
        for index, (extent, dim) in enumerate(zip(tensor.shape, shape)):
            value = _dim_value(dim, symbols)
            if value is None and dim[0] == "sym":
                symbols[dim[1]] = extent  # the first tensor of the call to give it
                check_limits(symbols, {dim[1]}, argument, mode, method)
            elif value is not None and value != extent:
                raise NcclInvalid(f"{argument}: shape {list(tensor.shape)}, expected {wanted}: extent {index} is "
                                  f"{extent}, but {_dim_text(dim)} = {value}", argument)
    if device is not None and tensor.device is not None and tensor.device != device:
        raise NcclInvalid(f"{argument} is on CUDA device {tensor.device}, the EP group on device {device}", argument)


def check_tensor_set(value: Any, cls: type, argument: str, symbols: dict, mode: str | None,
                     device: int | None, method: str | None = None) -> int:
    """A tensor-set argument (an instance of cls: DispatchInputs, ...): every field by its rule; its address."""
    if type(value) is not cls:
        raise NcclInvalid(f"{argument}: {type(value).__name__} is not an ep.{cls.__name__}", argument)
    tensors = value._tensors
    for field, rule in RECORDS[cls.__name__]["fields"]:
        tensor = tensors[field]
        if tensor is None:
            if rule["required"]:
                raise NcclInvalid(f"{argument}.{field} is required ({rule['doc']})", f"{argument}.{field}")
            continue
        if type(tensor).__name__ == "DevTensor" and tensor.closed:
            raise NcclInvalid(f"{argument}.{field}: the DevTensor was destroyed", f"{argument}.{field}")
        check_tensor(tensor, rule, f"{argument}.{field}", symbols, mode, device, method)
    return value.address


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


def met_at_creation(algorithm: int | None, config: Any) -> set:
    """The preconditions a new group meets: of its algorithm, and whose config field is non-zero
    (or that have neither a config field nor set_by methods); none for a group of unknown config."""
    met: set = set()
    if config is None:
        return met
    for name, p in PRECONDITIONS.items():
        if p["algorithms"] is not None and _ALGORITHMS.get(algorithm) not in p["algorithms"]:
            continue
        if (p["config"] is None and not p["set_by"]) or (p["config"] is not None and config._values[p["config"]]):
            met.add(name)
    return met


def satisfied(group: Any, names: tuple) -> None:
    """After a method that sets preconditions `names` succeeded on `group`: those of the group's
    algorithm are met (nothing for a handle's group that is not known: None)."""
    if group is None:
        return
    for name in names:
        algorithms = PRECONDITIONS[name]["algorithms"]
        if algorithms is None or _ALGORITHMS.get(group._algorithm) in algorithms:
            group._met.add(name)


def check_preconditions(group: Any, method: str, names: tuple) -> None:
    """The preconditions `names` that `method` requires, in order; the first the group lacks is refused."""
    for name in names:
        if name in group._met:
            continue
        p = PRECONDITIONS[name]
        if group._config is None:
            raise NcclInvalid(f"{method} needs {p['doc']} (precondition {name}); this group was adopted from a "
                              f"raw ncclEpGroup_t without its GroupConfig: make it with Group(ptr, comm=..., "
                              f"config=...) to say what it has", "group")
        algorithm = _ALGORITHMS.get(group._algorithm, str(group._algorithm))
        if p["algorithms"] is not None and algorithm not in p["algorithms"]:
            state = f"is {algorithm.upper()}"
        else:
            state = []
            if p["config"] is not None:
                state.append(f"has GroupConfig.{p['config']} = {group._config._values[p['config']]}")
            if p["set_by"]:
                state.append(f"no {' or '.join(p['set_by'])} has succeeded on it")
            state = " and ".join(state)
        raise NcclInvalid(f"{method} needs {p['doc']} (precondition {name}); this group {state}", "group")


def dead(owner: Any, method: str) -> NcclInvalid:
    what = "group" if type(owner).__name__ == "Group" else "handle"
    return NcclInvalid(f"{method}: the EP {what} was destroyed", what)


class Checked:
    """What a generated method's checks give its call: the C call's arguments (outs left out), the
    objects NCCL EP may use until the handle goes (keep), and the call's layout, mode and symbols."""

    __slots__ = ("c_args", "keep", "layout", "mode", "symbols")

    def __init__(self, c_args: tuple, keep: list, layout: int | None, mode: str | None, symbols: dict) -> None:
        self.c_args, self.keep, self.layout, self.mode, self.symbols = c_args, keep, layout, mode, symbols


def bind(symbols: dict, tensor: Any, dimensions: tuple, argument: str, mode: str | None, method: str) -> None:
    """The routing's symbols a tensor gives (topk_idx: num_tokens, top_k), their limits checked."""
    new = set()
    for symbol, index in dimensions:
        if len(tensor.shape) > index:
            symbols[symbol] = tensor.shape[index]
            new.add(symbol)
    if new:
        check_limits(symbols, new, argument, mode, method)


def tensor_argument(value: Any, argument: str, rule: str, optional: bool, symbols: dict, mode: str | None,
                    device: int | None, method: str, keep: list) -> Any:
    """A tensor argument (torch, CuPy, DLPack, ep.Tensor, ep.DevTensor) resolved and checked by
    [tensors.<rule>]; None where it is optional (else a named refusal)."""
    if value is None:
        if not optional:
            raise NcclInvalid(f"{argument} is required ({TENSOR_RULES[rule]['doc']})", argument)
        return None
    tensor = as_tensor(value, argument)
    check_tensor(tensor, TENSOR_RULES[rule], argument, symbols, mode, device, method)
    keep.append(tensor)
    return tensor


def tensor_set_argument(value: Any, cls: type, argument: str, optional: bool, symbols: dict, mode: str | None,
                        device: int | None, method: str, keep: list) -> int:
    """A tensor-set argument (DispatchInputs, ...): its address, 0 for None where it is optional."""
    if value is None:
        if optional:
            return 0
        raise NcclInvalid(f"{argument} is required (an ep.{cls.__name__})", argument)
    address = check_tensor_set(value, cls, argument, symbols, mode, device, method)
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
