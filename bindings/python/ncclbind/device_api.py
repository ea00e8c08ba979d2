"""ncclbind.device_api: the generated module ncclbind/_generated/device_api_functions.py (the
device API's process-wide host functions, from generator/spec) under its public name."""
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:  # what type checkers see under this name: the generated module's public names
    from ._generated.device_api_functions import *  # noqa: F403

from ._generated import device_api_functions as _generated

# One module object under both names, so private names are shared.
sys.modules[__name__] = _generated
