/* A stand-in libnccl that claims to be NCCL 2.27.0 and exports nothing but
 * ncclGetVersion, for the missing-symbol test. */
__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = 22700;
  return 0;
}
