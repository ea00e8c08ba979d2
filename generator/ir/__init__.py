"""The typed IR: what the generator knows about one header set, or about all of
them merged. Templates read only this (as objects or as the JSON dump)."""
from .types import TypeRef
from .function import Function, Param
from .record import Record, Field
from .enum import Enum, EnumValue
from .typedef import Typedef
from .constant import Constant, Initializer, InitializerField
from .module import HeaderSetIR, SkippedItem
from .device_function import DeviceFunction, DeviceParam, DeviceStorage, StorageMember

__all__ = ["TypeRef", "Function", "Param", "Record", "Field", "Enum", "EnumValue", "Typedef",
           "Constant", "Initializer", "InitializerField", "HeaderSetIR", "SkippedItem",
           "DeviceFunction", "DeviceParam", "DeviceStorage", "StorageMember"]
