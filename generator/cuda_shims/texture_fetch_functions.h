/* Written for ncclbind (not NVIDIA's): clang's CUDA wrapper header
 * (__clang_cuda_runtime_wrapper.h) includes texture_fetch_functions.h, which
 * CUDA 13 no longer ships. The generator's device-side parse of the NCCL
 * headers declares no texture functions, so an empty header stands in. */
