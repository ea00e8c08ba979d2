/* Smoke test of the nccl-ep header set: nccl_ep.h compiles against the <nccl.h> of its
 * depends_on set (EXPECTED_NCCL_VERSION_CODE, from BUILD), not the toolkit's, and libnccl_ep.so loads on a machine
 * without a GPU driver.
 *
 * libnccl_ep.so needs libcuda.so.1 and libnccl.so.2. Loading the CUDA driver stub and the
 * depends_on set's libnccl.so.2 first, by path and RTLD_GLOBAL, satisfies both by soname, so neither
 * LD_LIBRARY_PATH nor the toolkit's libnccl.so.2 (found through ld.so.conf) comes in. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <nccl_ep.h>

#if NCCL_VERSION_CODE != EXPECTED_NCCL_VERSION_CODE
#error "nccl_ep.h did not see its depends_on set's <nccl.h>"
#endif

static void *load(const char *env, int mode) {
  const char *path = getenv(env);
  if (path == NULL || *path == '\0') {
    fprintf(stderr, "FAIL: %s is not set\n", env);
    exit(1);
  }
  void *lib = dlopen(path, RTLD_NOW | mode);
  if (lib == NULL) {
    fprintf(stderr, "FAIL: dlopen(%s): %s\n", path, dlerror());
    exit(1);
  }
  return lib;
}

static int call_version(void *lib, const char *sym) {
  ncclResult_t (*fn)(int *) = (ncclResult_t(*)(int *))dlsym(lib, sym);
  if (fn == NULL) {
    fprintf(stderr, "FAIL: dlsym(%s): %s\n", sym, dlerror());
    exit(1);
  }
  int version = -1;
  if (fn(&version) != ncclSuccess) {
    fprintf(stderr, "FAIL: %s failed\n", sym);
    exit(1);
  }
  return version;
}

int main(void) {
  load("CUDA_STUB_PATH", RTLD_GLOBAL);
  void *nccl = load("NCCLBIND_NCCL_PATH", RTLD_GLOBAL);
  void *ep = load("NCCLBIND_NCCL_EP_PATH", RTLD_LOCAL);
  int nccl_version = call_version(nccl, "ncclGetVersion");
  int ep_version = call_version(ep, "ncclEpGetVersion");
  if (nccl_version != NCCL_VERSION_CODE || ep_version != NCCL_EP_VERSION_CODE) {
    fprintf(stderr, "FAIL: libnccl %d (header %d), libnccl_ep %d (header %d)\n", nccl_version,
            NCCL_VERSION_CODE, ep_version, NCCL_EP_VERSION_CODE);
    return 1;
  }
  printf("ok: libnccl %d, libnccl_ep %d\n", nccl_version, ep_version);
  return 0;
}
