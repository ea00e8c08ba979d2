# The stub of ncclbind._nccl is generated: ncclbind/_generated/_nccl.pyi.
from ._generated._nccl import *  # noqa: F401,F403
