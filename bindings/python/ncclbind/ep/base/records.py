"""The bases of the generated config and tensor-set classes (ep/_generated/classes.py): each builds
its C record once, checking every value, and is immutable after, so that a call can pass the
record's address without looking at it again."""
from __future__ import annotations

from ... import _nccl_ep
from ... import nccl_ep_enums
from ...errors import NcclInvalid
from .tensor import as_tensor

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any


def enum_value(class_name: str, value: Any, argument: str) -> int:
    """An enum argument (a member, its int value or its name, any case) as its int."""
    cls = getattr(nccl_ep_enums, class_name)
    if isinstance(value, bool):
        raise NcclInvalid(f"{argument}: {value!r} is a bool, not an {class_name}", argument)
    if isinstance(value, str):
        wanted = value.strip().upper()
        if wanted in cls.__members__:  # a member's name or an alias (LOW_LATENCY, FWD)
            return int(cls.__members__[wanted])
        for member in cls:
            if member.name == wanted or member.name.endswith("_" + wanted):
                return int(member)
        raise NcclInvalid(f"{argument}: {value!r} is not an {class_name} "
                          f"({', '.join(m.name for m in cls)})", argument)
    if isinstance(value, int):
        if value not in {int(m) for m in cls}:
            raise NcclInvalid(f"{argument}: {value} is not a value of {class_name} "
                              f"({', '.join(f'{m.name}={int(m)}' for m in cls)})", argument)
        return int(value)
    raise NcclInvalid(f"{argument}: {type(value).__name__} is not an {class_name}, its value or its name", argument)


def int_value(value: Any, argument: str, bounds: list[int] | tuple[int, int]) -> int:
    if type(value) is bool or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
        raise NcclInvalid(f"{argument}: {value!r} is not an int in {bounds[0]}..{bounds[1]}", argument)
    return int(value)


class ConfigRecord:
    """A configuration record: keyword arguments checked and written into the C record (stamped
    by its initializer); read back as attributes, under the Python keyword (nccl-extensions'
    spelling) and the C field's name where they differ."""

    __slots__ = ("_record", "_values", "_alloc")
    _c_name: str
    _initializer: str | None
    _fields: tuple
    _names: dict  # Python keyword or C field name -> C field name (set per class)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._names = {name: f[0] for f in cls._fields for name in (f[0], f[5])}

    def __init__(self, values: tuple, aliases: tuple = ()) -> None:
        record = getattr(_nccl_ep, self._initializer)() if self._initializer else getattr(_nccl_ep, self._c_name)()
        values = list(values)
        for c_field, value in aliases:  # the C field's name, given instead of the Python keyword
            if value is None:
                continue
            index, keyword = next((i, f[5]) for i, f in enumerate(self._fields) if f[0] == c_field)
            if values[index] is not type(self).__init__.__kwdefaults__[keyword]:
                raise NcclInvalid(f"{keyword} and {c_field} are one field: give one of them", c_field)
            values[index] = value
        checked = {}
        alloc = None
        for (name, kind, type_name, bounds, positive, keyword, boolean), value in zip(self._fields, values):
            if kind == "enum":
                checked[name] = getattr(nccl_ep_enums, type_name)(enum_value(type_name, value, keyword))
                setattr(record, name, int(checked[name]))
            elif kind == "alloc":
                from .allocator import AllocConfig
                if value is not None and not isinstance(value, AllocConfig):
                    raise NcclInvalid(f"{keyword}: {type(value).__name__} is not an ep.AllocConfig (or None)", keyword)
                alloc = checked[name] = value
                if value is not None:
                    alloc_fn, free_fn, context = value.addresses()
                    setattr(record, name, _nccl_ep.ncclEpAllocConfig_t(alloc_fn=alloc_fn, free_fn=free_fn,
                                                                       context=context))
            elif boolean and type(value) is bool:
                checked[name] = value
                setattr(record, name, int(value))
            else:
                checked[name] = int_value(value, keyword, bounds)
                setattr(record, name, checked[name])
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_values", checked)
        object.__setattr__(self, "_alloc", alloc)  # its trampolines live as long as this record

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_values")[type(self)._names[name]]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (its record is built once); make a new one")

    @property
    def record(self) -> Any:
        """The C record (an ncclbind._nccl_ep mirror)."""
        return self._record

    @property
    def address(self) -> int:
        return self._record.address

    def positive_failures(self) -> list[str]:
        """The fields that must be above 0 and are not (by their Python keywords)."""
        return [f[5] for f in self._fields if f[4] and self._values[f[0]] <= 0]

    def __repr__(self) -> str:
        values = ", ".join(f"{f[5]}={self._values[f[0]]!r}" for f in self._fields)
        return f"ep.{type(self).__name__}({values})"


class TensorSet:
    """A record of EP tensor pointers (inputs, outputs, layout info): each tensor resolved once,
    here; the record holds their descriptors' addresses and this object keeps them alive. Every
    field may be None here (nccl.ep's dataclasses); a required one is refused, naming it, when
    the record is used (ep.checks.check_tensor_set)."""

    __slots__ = ("_record", "_tensors", "_enum_values", "__weakref__")
    _c_name: str
    _initializer: str
    _fields: tuple
    _values: tuple = ()  # (field, enum class) of the record's non-tensor fields

    def __init__(self, tensors: tuple, values: tuple) -> None:
        record = getattr(_nccl_ep, self._initializer)()
        resolved = {}
        for name, obj in zip(self._fields, tensors):
            tensor = None if obj is None else as_tensor(obj, name)
            resolved[name] = tensor
            setattr(record, name, 0 if tensor is None else tensor.address)
        checked = {}
        for (name, class_name), value in zip(type(self)._values, values):
            checked[name] = getattr(nccl_ep_enums, class_name)(enum_value(class_name, value, name))
            setattr(record, name, int(checked[name]))
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_tensors", resolved)
        object.__setattr__(self, "_enum_values", checked)

    def __getattr__(self, name: str) -> Any:
        for table in ("_tensors", "_enum_values"):
            values = object.__getattribute__(self, table)
            if name in values:
                return values[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (its record is built once); make a new one")

    @property
    def address(self) -> int:
        return self._record.address

    @property
    def tensors(self) -> dict:
        """field -> its EP tensor (None where not given)."""
        return dict(self._tensors)

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self._tensors.items() if v is not None)
        return f"ep.{type(self).__name__}({given})"
