/* A libnccl.so.2 whose ncclGetVersion does nothing but store a constant, so the
 * benchmark measures the call mechanism rather than NCCL. */
__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = 22809;
  return 0;
}
