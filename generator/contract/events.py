"""Change events: one small frozen dataclass per kind of atomic API change.

Each kind holds exactly the fields it needs, all required; construction checks
every field's type, and reading one back from JSON fails on a missing or an
unknown key. `kind` in JSON is the class's KIND. Types are C type names
(surface.type_name), params and fields have their surface form."""
import copy
import dataclasses
from dataclasses import dataclass
from typing import ClassVar, NewType

Value = NewType("Value", object)            # a constant's value: int, float, str, or None (NULL)
Params = NewType("Params", list)            # [{name, type}]
FieldSpec = NewType("FieldSpec", dict)      # {name, type, offset} (+ bit_offset for a bitfield)
Fields = NewType("Fields", list)            # [FieldSpec]
EnumValues = NewType("EnumValues", dict)    # {name: int}
InitValues = NewType("InitValues", dict)    # {field: Value}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_value(v):
    return v is None or isinstance(v, (str, float)) or _is_int(v)


def _is_param(v):
    return isinstance(v, dict) and set(v) == {"name", "type"} and all(isinstance(x, str) for x in v.values())


def _is_field(v):
    if not isinstance(v, dict):
        return False
    keys = {"name", "type", "offset"} | ({"bit_offset"} if "bit_offset" in v else set())
    return (set(v) == keys and isinstance(v["name"], str) and isinstance(v["type"], str)
            and _is_int(v["offset"]) and ("bit_offset" not in v or _is_int(v["bit_offset"])))


_CHECKS = {
    str: lambda v: isinstance(v, str),
    int: _is_int,
    bool: lambda v: isinstance(v, bool),
    Value: _is_value,
    Params: lambda v: isinstance(v, list) and all(_is_param(p) for p in v),
    FieldSpec: _is_field,
    Fields: lambda v: isinstance(v, list) and all(_is_field(f) for f in v),
    EnumValues: lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_int(x) for k, x in v.items()),
    InitValues: lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_value(x) for k, x in v.items()),
}


@dataclass(frozen=True)
class Event:
    KIND: ClassVar[str] = ""
    SECTION: ClassVar[str] = ""   # the surface section of the item it changes
    ITEM: ClassVar[str] = "name"  # the field that names that item

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not _CHECKS[f.type](value):
                raise TypeError(f"{self.KIND}.{f.name}: {value!r} is not a {getattr(f.type, '__name__', f.type)}")

    @property
    def item(self) -> str:
        return getattr(self, self.ITEM)

    def to_json(self) -> dict:
        out = {"kind": self.KIND}
        out.update({f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)})
        return out


# Functions and their parameters. A parameter's index is its position: in the
# old list for param_removed, in the new one otherwise.
@dataclass(frozen=True)
class FunctionAdded(Event):
    KIND, SECTION = "function_added", "functions"
    name: str
    result: str
    params: Params


@dataclass(frozen=True)
class FunctionRemoved(Event):
    KIND, SECTION = "function_removed", "functions"
    name: str


@dataclass(frozen=True)
class FunctionResultChanged(Event):
    KIND, SECTION = "function_result_changed", "functions"
    name: str
    result: str
    old_result: str


@dataclass(frozen=True)
class ParamAdded(Event):
    KIND, SECTION, ITEM = "param_added", "functions", "function"
    function: str
    index: int
    name: str
    type: str


@dataclass(frozen=True)
class ParamRemoved(Event):
    KIND, SECTION, ITEM = "param_removed", "functions", "function"
    function: str
    index: int
    name: str


@dataclass(frozen=True)
class ParamRenamed(Event):
    KIND, SECTION, ITEM = "param_renamed", "functions", "function"
    function: str
    index: int
    name: str
    old_name: str


@dataclass(frozen=True)
class ParamTypeChanged(Event):
    KIND, SECTION, ITEM = "param_type_changed", "functions", "function"
    function: str
    index: int
    name: str
    type: str
    old_type: str


# Structs and unions and their fields (fields are named, so only an added
# field needs its position in the new list).
@dataclass(frozen=True)
class RecordAdded(Event):
    KIND, SECTION = "record_added", "records"
    name: str
    record_kind: str   # struct | union
    size: int
    align: int
    fields: Fields


@dataclass(frozen=True)
class RecordRemoved(Event):
    KIND, SECTION = "record_removed", "records"
    name: str


@dataclass(frozen=True)
class RecordKindChanged(Event):
    KIND, SECTION = "record_kind_changed", "records"
    name: str
    record_kind: str
    old_record_kind: str


@dataclass(frozen=True)
class RecordSizeChanged(Event):
    KIND, SECTION = "record_size_changed", "records"
    name: str
    size: int
    old_size: int


@dataclass(frozen=True)
class RecordAlignChanged(Event):
    KIND, SECTION = "record_align_changed", "records"
    name: str
    align: int
    old_align: int


@dataclass(frozen=True)
class FieldAdded(Event):
    KIND, SECTION, ITEM = "field_added", "records", "record"
    record: str
    index: int
    field: FieldSpec


@dataclass(frozen=True)
class FieldRemoved(Event):
    KIND, SECTION, ITEM = "field_removed", "records", "record"
    record: str
    name: str


@dataclass(frozen=True)
class FieldTypeChanged(Event):
    KIND, SECTION, ITEM = "field_type_changed", "records", "record"
    record: str
    name: str
    type: str
    old_type: str


@dataclass(frozen=True)
class FieldOffsetChanged(Event):
    KIND, SECTION, ITEM = "field_offset_changed", "records", "record"
    record: str
    name: str
    offset: int
    old_offset: int


@dataclass(frozen=True)
class FieldBitOffsetChanged(Event):
    KIND, SECTION, ITEM = "field_bit_offset_changed", "records", "record"
    record: str
    name: str
    bit_offset: int
    old_bit_offset: int


# Enums and their values.
@dataclass(frozen=True)
class EnumAdded(Event):
    KIND, SECTION = "enum_added", "enums"
    name: str
    size: int
    signed: bool
    values: EnumValues


@dataclass(frozen=True)
class EnumRemoved(Event):
    KIND, SECTION = "enum_removed", "enums"
    name: str


@dataclass(frozen=True)
class EnumTypeChanged(Event):
    """The underlying integer type: its size or signedness."""
    KIND, SECTION = "enum_type_changed", "enums"
    name: str
    size: int
    signed: bool
    old_size: int
    old_signed: bool


@dataclass(frozen=True)
class EnumValueAdded(Event):
    KIND, SECTION, ITEM = "enum_value_added", "enums", "enum"
    enum: str
    name: str
    value: int


@dataclass(frozen=True)
class EnumValueRemoved(Event):
    KIND, SECTION, ITEM = "enum_value_removed", "enums", "enum"
    enum: str
    name: str


@dataclass(frozen=True)
class EnumValueChanged(Event):
    KIND, SECTION, ITEM = "enum_value_changed", "enums", "enum"
    enum: str
    name: str
    value: int
    old_value: int


# Typedefs.
@dataclass(frozen=True)
class TypedefAdded(Event):
    KIND, SECTION = "typedef_added", "typedefs"
    name: str
    type: str


@dataclass(frozen=True)
class TypedefRemoved(Event):
    KIND, SECTION = "typedef_removed", "typedefs"
    name: str


@dataclass(frozen=True)
class TypedefChanged(Event):
    KIND, SECTION = "typedef_changed", "typedefs"
    name: str
    type: str
    old_type: str


# Constants (object-like macros).
@dataclass(frozen=True)
class ConstantAdded(Event):
    KIND, SECTION = "constant_added", "constants"
    name: str
    type: str
    value: Value


@dataclass(frozen=True)
class ConstantRemoved(Event):
    KIND, SECTION = "constant_removed", "constants"
    name: str


@dataclass(frozen=True)
class ConstantValueChanged(Event):
    KIND, SECTION = "constant_value_changed", "constants"
    name: str
    value: Value
    old_value: Value


@dataclass(frozen=True)
class ConstantTypeChanged(Event):
    KIND, SECTION = "constant_type_changed", "constants"
    name: str
    type: str
    old_type: str


# Initializer macros (*_INITIALIZER) and the field values they assign.
@dataclass(frozen=True)
class InitializerAdded(Event):
    KIND, SECTION = "initializer_added", "initializers"
    name: str
    record: str
    values: InitValues


@dataclass(frozen=True)
class InitializerRemoved(Event):
    KIND, SECTION = "initializer_removed", "initializers"
    name: str


@dataclass(frozen=True)
class InitializerRecordChanged(Event):
    KIND, SECTION = "initializer_record_changed", "initializers"
    name: str
    record: str
    old_record: str


@dataclass(frozen=True)
class InitializerFieldAdded(Event):
    KIND, SECTION, ITEM = "initializer_field_added", "initializers", "initializer"
    initializer: str
    field: str
    value: Value


@dataclass(frozen=True)
class InitializerFieldRemoved(Event):
    KIND, SECTION, ITEM = "initializer_field_removed", "initializers", "initializer"
    initializer: str
    field: str


@dataclass(frozen=True)
class InitializerValueChanged(Event):
    KIND, SECTION, ITEM = "initializer_value_changed", "initializers", "initializer"
    initializer: str
    field: str
    value: Value
    old_value: Value


EVENT_CLASSES = {cls.KIND: cls for cls in Event.__subclasses__()}


def event_from_json(raw: dict) -> Event:
    """The event whose to_json() is `raw`; fails on an unknown kind or a missing or unknown key."""
    cls = EVENT_CLASSES.get(raw.get("kind"))
    if cls is None:
        raise ValueError(f"unknown event kind {raw.get('kind')!r} in {raw}")
    names = {f.name for f in dataclasses.fields(cls)}
    given = set(raw) - {"kind"}
    if given != names:
        raise ValueError(f"{cls.KIND}: missing {sorted(names - given)}, unknown {sorted(given - names)} in {raw}")
    return cls(**{k: copy.deepcopy(v) for k, v in raw.items() if k != "kind"})
