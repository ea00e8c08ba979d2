/* Smoke test of @ncclbind_inputs: a header set's <nccl.h> compiles, and its libnccl.so.2,
 * given as a data dep, dlopens and reports the same version.
 *
 * Built once per header set (see BUILD): EXPECTED_VERSION_CODE is the set's version and
 * NCCLBIND_NCCL_PATH (env, from $(rootpath)) is its library. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#if NCCL_VERSION_CODE != EXPECTED_VERSION_CODE
#error "<nccl.h> is not the header set this test was built for"
#endif

typedef ncclResult_t (*get_version_fn)(int *);

int main(void) {
  const char *path = getenv("NCCLBIND_NCCL_PATH");
  if (path == NULL || *path == '\0') {
    fprintf(stderr, "FAIL: NCCLBIND_NCCL_PATH is not set\n");
    return 1;
  }
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "FAIL: dlopen(%s): %s\n", path, dlerror());
    return 1;
  }
  get_version_fn get_version = (get_version_fn)dlsym(lib, "ncclGetVersion");
  if (get_version == NULL) {
    fprintf(stderr, "FAIL: dlsym(ncclGetVersion): %s\n", dlerror());
    return 1;
  }
  int version = 0;
  ncclResult_t rc = get_version(&version);
  if (rc != ncclSuccess || version != NCCL_VERSION_CODE) {
    fprintf(stderr, "FAIL: ncclGetVersion -> rc %d, version %d; header has %d\n", (int)rc, version,
            NCCL_VERSION_CODE);
    return 1;
  }
  printf("ok: %s: ncclGetVersion = %d = NCCL_VERSION_CODE\n", path, version);
  return 0;
}
