/* A stand-in for ncclbind's interposition shim: its marker and one wrapper. */
__attribute__((visibility("default"))) int ncclbind_shim_version(void) {
  return 1;
}

__attribute__((visibility("default"))) const char *ncclGetErrorString(int result) {
  (void)result;
  return "from the shim";
}
