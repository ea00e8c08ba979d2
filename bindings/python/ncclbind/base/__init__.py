"""Hand-written support beneath the generated layer: what ncclbind/_generated calls when it runs
(argument checks, buffer-method rows and the C fast path's installation, the per-call and
communicator configs, dtypes, streams, the watchdog wrapper, unique ids, open enums, CUDA).

Layering, bottom up: the C extensions (_nccl, _nccl_ep) and the generated records and enums;
base/ (this package: it imports nothing from core/, ep/ or the package face when it runs);
_generated/ (its methods); core/, ep/, symmetric/ ... (the classes users hold); the face
(ncclbind/__init__.py). tests/python/test_generated_layer.py holds both rules."""
