"""The hand-written support of ncclbind.ep that the generated layer stands on
(ep/_generated/classes.py, ep/_generated/methods.py): the check of one argument, rule or group
state (checks.py), the config and tensor-set records' bases (records.py), the allocator record
(allocator.py) and the caller-owned tensor descriptor (tensor.py). Like ncclbind/base/, it imports
nothing above it (not core/, ep's public modules or the package face;
tests/python/test_generated_layer.py); ncclbind.ep gives these their public names."""
