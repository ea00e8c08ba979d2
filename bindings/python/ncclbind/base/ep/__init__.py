"""The hand-written support of ncclbind.ep that the generated layer stands on
(_generated/ep_classes.py, _generated/ep_methods.py): the check of one argument, rule or group
state (checks.py), the config and tensor-set records' bases (records.py), the allocator record
(allocator.py) and the caller-owned tensor descriptor (tensor.py). Like the rest of base/, it
imports nothing of core/, ep/ or the package face; ncclbind.ep gives these their public names."""
