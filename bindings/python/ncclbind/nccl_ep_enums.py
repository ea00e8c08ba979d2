"""ncclbind.nccl_ep_enums: the generated module ncclbind/_generated/nccl_ep_enums.py under its public name."""
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:  # what type checkers see under this name: the generated module's public names
    from ._generated.nccl_ep_enums import *  # noqa: F403

from ._generated import nccl_ep_enums as _generated

# One module object under both names, so classes, pickling and private names are shared.
sys.modules[__name__] = _generated
