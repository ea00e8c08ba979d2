// A stand-in libnccl_ep whose functions throw C++ exceptions out of their C API, as libnccl_ep
// 0.2.0's do (its host asserts; its destroy calls after a device fault). The version it reports
// is THROWING_NCCL_EP_VERSION (the tests pass the IR's). No NCCL symbol is needed.
#include <cstdlib>
#include <stdexcept>

#define API extern "C" __attribute__((visibility("default")))

API int ncclEpGetVersion(int *version) {
  const char *claimed = std::getenv("THROWING_NCCL_EP_VERSION");
  *version = claimed ? std::atoi(claimed) : 0;
  return 0;
}

API int ncclEpGroupDestroy(void *) {
  throw std::runtime_error("stand-in: CUDA error: an illegal memory access was encountered");
}

API int ncclEpHandleDestroy(void *) { throw 42; }  // not a std::exception
