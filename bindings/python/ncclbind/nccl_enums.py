"""ncclbind.nccl_enums: NCCL's enums as Python enums (the generated module
ncclbind/_generated/nccl_enums.py, re-exported: the same classes)."""
from ._generated.nccl_enums import *  # noqa: F403
from ._generated.nccl_enums import __all__  # noqa: F401
