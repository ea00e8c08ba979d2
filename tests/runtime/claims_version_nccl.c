/* A stand-in libnccl that claims the version CLAIMED_VERSION_CODE (set by BUILD from the IR)
 * and exports nothing but ncclGetVersion: new enough by its number, yet it lacks everything
 * libnccl_ep links against. */
__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = CLAIMED_VERSION_CODE;
  return 0;
}
