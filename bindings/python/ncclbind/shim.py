"""ncclbind.shim: control of the interposition library from inside a traced process
(ncclbind/trace/shim.py, re-exported under its documented name: the same functions)."""
from .trace.shim import *  # noqa: F403
from .trace.shim import __all__  # noqa: F401
