"""Filling NCCL's versioned structs (ncclConfig_t, ncclDevCommRequirements_t, ...).

A struct is built in the layout the loaded library uses, with that layout's
version stamp (its *_INITIALIZER): the newest layout whose first version is
not newer than the loaded library. Fields are set by their C name or its
snake_case spelling (comm_name for commName); a field the layout lacks raises
NcclInvalid at once, naming the version that has it. Nothing is dropped.
"""
from __future__ import annotations

from .. import _nccl
from ..errors import NcclInvalid


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
    raise NcclInvalid(f"{record_class.__name__} has no field {name!r} in any layout this binding knows "
                      f"({', '.join(sorted(fields))})", name)


def fill(record, fields: dict, protected=("size", "magic", "version")):
    """Set fields on a record (C or snake_case names); returns the record."""
    for name, value in fields.items():
        c_name = field_name(type(record), name)
        if c_name in protected:
            raise NcclInvalid(f"{type(record).__name__}.{c_name} is the layout's stamp; it is set for you", name)
        setattr(record, c_name, value)
    return record


def initialized(record_class, initializer=None, **fields):
    """A record_class instance in the loaded library's layout, filled by its
    initializer (zeroed for a layout older than the macro), then `fields`."""
    record = initializer() if initializer is not None else record_class()
    return fill(record, fields)


def comm_config(config=None, **fields):
    """An ncclConfig_t for the loaded library: NCCL_CONFIG_INITIALIZER, then
    the fields of `config` (a dict, or an ncclConfig_t used as it is) and `fields`.
    None when there is nothing to set (the call then passes no config)."""
    if isinstance(config, _nccl.ncclConfig_t):
        return fill(config, fields) if fields else config
    if config is not None and not isinstance(config, dict):
        raise NcclInvalid(f"config: an ncclConfig_t or a dict of its fields, not {type(config).__name__}", "config")
    if config and not all(isinstance(name, str) for name in config):
        raise NcclInvalid(f"config: field names are str, not {sorted(map(repr, config))}", "config")
    values = dict(config or {}, **fields)
    if config is None and not fields:
        return None
    return initialized(_nccl.ncclConfig_t, _nccl.nccl_config_initializer, **values)
