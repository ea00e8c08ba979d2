/* Stand-ins with the real SONAMEs (set by tests/runtime/BUILD), so that a copy already in
 * the process is what the runtime finds by name: a libnccl claiming 2.32.3, or, built with
 * STAND_IN_NCCL_EP, a libnccl_ep claiming 0.2.0. */
#ifdef STAND_IN_NCCL_EP
__attribute__((visibility("default"))) int ncclEpGetVersion(int *version) {
  *version = 200;
  return 0;
}
#else
__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = 23203;
  return 0;
}

__attribute__((visibility("default"))) const char *ncclGetErrorString(int result) {
  (void)result;
  return "from the library";
}
#endif
