"""ncclbind.dev_comm: the host side of device communicators (their kernels are ncclbind.device's):
DevCommResource, what Communicator.create_dev_comm makes, and the device API's process-wide host
functions (the generated module ncclbind/_generated/dev_comm_functions.py, from policy,
owner dev_comm, re-exported)."""
from ._generated.dev_comm_functions import *  # noqa: F403
from ._generated.dev_comm_functions import __all__ as _functions
from .core.dev_comm import DevCommResource

__all__ = [*_functions, "DevCommResource"]
