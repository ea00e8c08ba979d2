"""The Communicator's internal interface: the attributes and methods that the generated methods,
the feature folders and the C fast path (bindings/python/src/call_engine.c) rely on, declared
once. The generator reads this file (generator/render/comm_interface.py, with ast, never by
importing it) and renders bindings/python/src/generated/comm_interface.h: the fast path's slot
names, in this order, and the method it calls. core/communicator.py builds its __slots__ from
SLOTS. Renaming an entry here renames it for both; renaming it elsewhere alone fails
//tests/python:test_comm_interface."""

# (name, what it holds): kept in the Communicator's __slots__; the C fast path reads them at
# their slot offsets, in this order (enum nbpy_comm_field).
SLOTS = (
    ("_handle", "the ncclComm_t as an int, 0 once destroyed or aborted"),
    ("_device", "the CUDA device the communicator was made on (an int)"),
    ("_rank", "this rank (an int)"),
    ("_nranks", "the communicator's size (an int)"),
    ("_gate", "the call gate every NCCL call that takes _handle enters (call_gate.h)"),
)

# (name, what it does): the methods generated code calls; the C fast path calls FAST_PATH_METHOD.
METHODS = (
    ("_live", "the handle, or NcclInvalid naming comm when destroyed or aborted"),
    ("_op", "a reduction op argument (name, enum, custom op) as ncclRedOp_t for a data type"),
    ("_buffer", "a buffer argument resolved to an NcclBuffer, checked for device and stream"),
    ("_check_rank", "a rank argument checked against _nranks, naming the argument"),
)

FAST_PATH_METHOD = "_op"
