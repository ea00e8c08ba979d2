"""ncclbind.nccl_ep_enums: the generated module ncclbind/_generated/nccl_ep_enums.py under its public name."""
import sys

from ._generated import nccl_ep_enums as _generated

# One module object under both names, so classes, pickling and private names are shared.
sys.modules[__name__] = _generated
