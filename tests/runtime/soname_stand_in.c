/* Stand-ins with the real SONAMEs (set by tests/runtime/BUILD), so that a copy already in
 * the process is what the runtime finds by name: a libnccl claiming 2.32.3, or, built with
 * STAND_IN_NCCL_EP=<version code>, a libnccl_ep claiming that version (the EP header set's,
 * or one the bindings register nothing for). */
#ifdef STAND_IN_NCCL_EP
__attribute__((visibility("default"))) int ncclEpGetVersion(int *version) {
  *version = STAND_IN_NCCL_EP;
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
