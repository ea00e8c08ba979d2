"""nccl4py's interop helpers, as ncclbind.cupy and ncclbind.torch (loaded when first used):
arrays and tensors in ncclMemAlloc memory (empty) and their (ptr, count, dtype, device)."""
