"""ncclbind.params: NCCL's process-wide parameter registry (ncclbind/core/params.py) under its
public name."""
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:  # what type checkers see under this name: the module's public names
    from .core.params import *  # noqa: F403

from .core import params as _params

# One module object under both names, so classes and private names are shared.
sys.modules[__name__] = _params
