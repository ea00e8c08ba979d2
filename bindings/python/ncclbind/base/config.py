"""Filling NCCL's versioned structs (ncclConfig_t, ncclDevCommRequirements_t, ...).

A struct is built in the layout the loaded library uses, with that layout's
version stamp (its *_INITIALIZER): the newest layout whose first version is
not newer than the loaded library. Fields are set by their C name, its
snake_case spelling (comm_name for commName) or nccl4py's (min_ctas for
minCTAs); a field the layout lacks raises NcclInvalid at once, naming the
version that has it. Nothing is dropped. nccl4py's record classes (NCCLConfig,
NCCLCollConfig, NCCLTeam, ..., generated from policy/python_api.toml)
become their structs here too (record_struct, as_struct).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _nccl
from ..errors import NcclInvalid

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from typing import Any


def _snake(name: str) -> str:
    import re
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name)).lower()


def field_name(record_class, name: str) -> str:
    """The C field name of `name` (C or snake_case) in any layout of record_class."""
    fields = {f for layout in record_class.layouts for f in layout["fields"]}
    if name in fields:
        return name
    for f in fields:
        if _snake(f) == name:
            return f
    spelled = _nccl4py_field(record_class, name)
    if spelled is not None:
        return spelled
    raise NcclInvalid(f"{record_class.__name__} has no field {name!r} in any layout this binding knows "
                      f"({', '.join(sorted(fields))})", name)


def fill(record, fields: dict[str, Any], protected=("size", "magic", "version")):
    """Set fields on a record (C or snake_case names); returns the record."""
    for name, value in fields.items():
        c_name = field_name(type(record), name)
        if c_name in protected:
            raise NcclInvalid(f"{type(record).__name__}.{c_name} is the layout's stamp; it is set for you", name)
        _records().check_documented(type(record).__name__, c_name, value, name)  # NCCL's documented ranges
        setattr(record, c_name, value)
    return record


def initialized(record_class, initializer=None, **fields):
    """A record_class instance in the loaded library's layout, filled by its
    initializer (zeroed for a layout older than the macro), then `fields`."""
    record = initializer() if initializer is not None else record_class()
    return fill(record, fields)


def comm_config(config=None, **fields):
    """An ncclConfig_t for the loaded library: NCCL_CONFIG_INITIALIZER, then
    the fields of `config` (a dict, an NCCLConfig, or an ncclConfig_t used as it is) and
    `fields`. None when there is nothing to set (the call then passes no config)."""
    if is_record(config) and type(config).C_STRUCT == "ncclConfig_t":
        config = record_struct(config, "config")
    if isinstance(config, _nccl.ncclConfig_t):
        return fill(config, fields) if fields else config
    if config is not None and not isinstance(config, dict):
        raise NcclInvalid(f"config: an NCCLConfig, an ncclConfig_t or a dict of its fields, not "
                          f"{type(config).__name__}", "config")
    if config and not all(isinstance(name, str) for name in config):
        raise NcclInvalid(f"config: field names are str, not {sorted(map(repr, config))}", "config")
    values = dict(config or {}, **fields)
    if config is None and not fields:
        return None
    return initialized(_nccl.ncclConfig_t, _nccl.nccl_config_initializer, **values)


# ---- nccl4py's record classes (generated: ncclbind/_generated/nccl_records.py) -----------------------

def _records():
    from .._generated import nccl_records
    return nccl_records


def _nccl4py_field(record_class, name: str) -> str | None:
    """The C field of an nccl4py field name (min_ctas: minCTAs) of record_class's record class."""
    for cls in vars(_records()).values():
        if isinstance(cls, type) and getattr(cls, "C_STRUCT", None) == record_class.__name__:
            return cls.C_NAMES.get(name)
    return None


def is_record(value) -> bool:
    """Whether value is an instance of a generated record class (NCCLConfig, NCCLTeam, ...)."""
    return isinstance(getattr(type(value), "C_STRUCT", None), str) and hasattr(type(value), "C_NAMES") \
        and type(value).__module__ == _records().__name__


def _settable(value, struct, c_name: str):
    """value as the struct's field takes it: nested records as their structs; a bool into an int
    field as 0 or 1 (nccl4py's blocking=True)."""
    if is_record(value):
        return record_struct(value)
    if isinstance(value, bool):
        try:
            current = getattr(struct, c_name)
        except NcclInvalid:  # a field the layout lacks: setattr says so
            return value
        return value if isinstance(current, bool) else int(value)
    return value


def record_struct(record, argument: str | None = None, values: dict[str, Any] | None = None):
    """The C struct of a generated record (an input or a value) in the loaded library's layout:
    its initializer (a zeroed struct where there is none), then each field that is not None.
    A field the layout lacks raises NcclInvalid naming the first release that has it, and the
    argument (or the field) it came from. `values` overrides fields by Python name. Sequence
    fields (lists NCCL walks) are the caller's: coll_config_struct, core/dev_comm.py."""
    cls = type(record)
    struct_class = getattr(_nccl, cls.C_STRUCT)
    initializer = getattr(cls, "C_INITIALIZER", None)
    struct = getattr(_nccl, initializer)() if initializer else struct_class()
    for name, c_name in cls.C_NAMES.items():
        value = values[name] if values and name in values else getattr(record, name)
        if value is None:
            continue
        try:
            setattr(struct, c_name, _settable(value, struct, c_name))
        except NcclInvalid as e:
            where = f"{argument}: " if argument else ""
            raise NcclInvalid(f"{where}{cls.__name__}.{name}: {e}", argument or name) from None
        except (TypeError, ValueError, OverflowError) as e:
            where = f"{argument}: " if argument else ""
            raise NcclInvalid(f"{where}{cls.__name__}.{name}: {e}", argument or name) from None
    return struct


def as_struct(value, argument: str):
    """value's C struct if value is a generated record (NCCLTeam, NCCLConfig, NCCLCollConfig, ...),
    else value itself: where a call takes an ncclTeam_t, an ncclConfig_t or an ncclCollConfig_t,
    nccl4py's record is taken as well."""
    if not is_record(value):
        return value
    if type(value).C_STRUCT == "ncclCollConfig_t":
        return coll_config_struct(value, argument)
    return record_struct(value, argument)


@dataclass(frozen=True)
class VendorOption:
    """One vendor-specific option of an NCCLCollConfig (an ncclConfigExt_t node of its ext chain),
    keyed by (vendor_id, option_id); exactly one of int_value, str_value, raw_value is set. The
    official NCCL ignores every extension; a vendor library acts on its own vendor_id."""

    vendor_id: int
    option_id: int
    int_value: int | None = None
    str_value: str | None = None
    raw_value: int | None = None

    def __post_init__(self):
        given = [name for name in ("int_value", "str_value", "raw_value") if getattr(self, name) is not None]
        if len(given) != 1:
            raise NcclInvalid("VendorOption requires exactly one of int_value, str_value, raw_value to be set, got "
                              f"{given or 'none'}", "VendorOption")


def _vendor_options(options, argument: str) -> tuple[VendorOption, ...]:
    if isinstance(options, (VendorOption, str, bytes)) or not isinstance(options, (tuple, list)):
        raise NcclInvalid(f"{argument}: vendor_options is a sequence of VendorOption, not {type(options).__name__}",
                          argument)
    seen = set()
    for option in options:
        if not isinstance(option, VendorOption):
            raise NcclInvalid(f"{argument}: vendor_options holds VendorOption, not {type(option).__name__}", argument)
        key = (option.vendor_id, option.option_id)
        if key in seen:
            raise NcclInvalid(f"{argument}: vendor option (vendor_id={key[0]}, option_id={key[1]}) is given twice; "
                              "keys are unique", argument)
        seen.add(key)
    return tuple(options)


def _event_handle(event, argument: str) -> int:
    """A cudaEvent_t as an int: an int, or an object with handle (cuda.core), cuda_event (torch) or ptr (CuPy)."""
    if isinstance(event, int) and not isinstance(event, bool):
        return event
    for attribute in ("handle", "cuda_event", "ptr"):
        value = getattr(event, attribute, None)
        if value is not None and not isinstance(value, bool):
            try:
                return int(value)
            except (TypeError, ValueError):
                pass
    raise NcclInvalid(f"{argument}: launch_completion_event is an int cudaEvent_t or a CUDA event object, not "
                      f"{type(event).__name__}", argument)


def coll_config_struct(config, argument: str = "config"):
    """An NCCLCollConfig as the ncclCollConfig_t of the loaded layout, its vendor_options linked as
    ncclConfigExt_t nodes from ext (the struct holds them: pointer fields keep their targets)."""
    options = _vendor_options(config.vendor_options, argument)
    event = config.launch_completion_event
    values = {} if event is None else {"launch_completion_event": _event_handle(event, argument)}
    struct = record_struct(config, argument, values)
    nodes = []
    for option in options:
        node = _nccl.ncclConfigExt_t()
        node.key.vendorId = option.vendor_id
        node.key.optionId = option.option_id
        if option.int_value is not None:
            node.val.i = option.int_value
        elif option.str_value is not None:
            node.val.s = option.str_value
        else:
            node.val.raw = option.raw_value
        if nodes:
            nodes[-1].next = node
        nodes.append(node)
    if nodes:
        struct.ext = nodes[0]
    return struct
