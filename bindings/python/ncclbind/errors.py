"""ncclbind.errors: NCCL's result codes and ncclbind's exceptions (the generated module
ncclbind/_generated/errors.py, re-exported: the same classes and functions)."""
from ._generated.errors import *  # noqa: F403
from ._generated.errors import __all__  # noqa: F401
