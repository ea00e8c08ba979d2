"""The hand-written floor of the device API's generated code (device/_generated/cute.py stands on
cute_abi.py). Like ncclbind/base/, it imports nothing above it (tests/python/test_generated_layer.py)."""
