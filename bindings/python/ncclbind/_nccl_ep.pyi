# The stub of ncclbind._nccl_ep is generated: ncclbind/_generated/_nccl_ep.pyi.
from ._generated._nccl_ep import *  # noqa: F401,F403
