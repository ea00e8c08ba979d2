"""ncclbind.device_api: the device API's process-wide host functions (the generated module
ncclbind/_generated/device_api_functions.py, from generator/spec, re-exported)."""
from ._generated.device_api_functions import *  # noqa: F403
from ._generated.device_api_functions import __all__  # noqa: F401
