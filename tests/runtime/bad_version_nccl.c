/* A stand-in libnccl whose ncclGetVersion reports -7: loaded, then refused. */
__attribute__((visibility("default"))) int ncclGetVersion(int *version) {
  *version = -7;
  return 0;
}
