/* Loads libnccl_ep, which needs libcuda.so.1 and a libnccl.so.2 recent enough.
 * Usage: nccl_ep_load_test missing-cuda LIBNCCL_EP LIBNCCL
 *        nccl_ep_load_test with-stub LIBNCCL_EP LIBNCCL EXPECTED_VERSION_CODE CUDA_STUB
 * missing-cuda: no libcuda.so.1 on this machine, so the load fails and the
 *   error carries dlerror's reason, which names libcuda.so.1.
 * with-stub: the CUDA driver stub (SONAME libcuda.so.1) is loaded first; the
 *   runtime loads LIBNCCL before libnccl_ep so libnccl_ep binds to it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include "check.h"
#include "ncclbind/runtime.h"

static ncclbind_symbol ep_get_version_slot = {NULL, "ncclEpGetVersion", NCCLBIND_LIB_NCCL_EP, 0, 0};

static int missing_cuda(const char *ep_library, const char *nccl_library) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda) {
    printf("SKIP nccl_ep_load_test missing-cuda: this machine has a libcuda.so.1\n");
    return 0;
  }
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, nccl_library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL_EP, ep_library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  const char *message = ncclbind_last_error();
  CHECK_CONTAINS(message, "libnccl_ep could not be loaded");
  CHECK_CONTAINS(message, ep_library);
  CHECK_CONTAINS(message, "libcuda.so.1: cannot open shared object file");

  CHECK(!ncclbind_symbol_get(&ep_get_version_slot),
        "a slot resolved although the library failed to load");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  ncclbind_library_info info;
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL_EP, &info),
               NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_INT_EQ(info.loaded, 0);
  CHECK_INT_EQ(info.version_code, 0);
  printf("PASS nccl_ep_load_test missing-cuda:\n%s\n", message);
  return 0;
}

static int with_stub(const char *ep_library, const char *nccl_library, int expected_version,
                     const char *cuda_stub) {
  CHECK(dlopen(cuda_stub, RTLD_NOW | RTLD_GLOBAL), "cannot load the CUDA stub: %s", dlerror());
  char ep_real_path[PATH_MAX], nccl_real_path[PATH_MAX];
  CHECK(realpath(ep_library, ep_real_path), "realpath(%s) failed", ep_library);
  CHECK(realpath(nccl_library, nccl_real_path), "realpath(%s) failed", nccl_library);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, nccl_library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL_EP, ep_library), NCCLBIND_OK);

  ncclbind_library_info info;
  int status = ncclbind_get_library_info(NCCLBIND_LIB_NCCL_EP, &info);
  CHECK(status == NCCLBIND_OK, "%s: %s", ncclbind_result_name(status), ncclbind_last_error());
  CHECK_INT_EQ(info.version_code, expected_version);
  CHECK_INT_EQ(info.major, expected_version / 10000);
  CHECK_INT_EQ(info.minor, expected_version % 10000 / 100);
  CHECK_INT_EQ(info.patch, expected_version % 100);
  CHECK_STR_EQ(info.path, ep_real_path);
  CHECK_STR_EQ(info.cuda_variant, "cu13");
  CHECK_INT_EQ(info.cuda_major, 13);

  int (*ep_get_version)(int *) = (int (*)(int *))ncclbind_symbol_get(&ep_get_version_slot);
  CHECK(ep_get_version, "ncclEpGetVersion did not resolve: %s", ncclbind_last_error());
  int version = 0;
  CHECK_INT_EQ(ep_get_version(&version), 0);
  CHECK_INT_EQ(version, expected_version);

  /* libnccl_ep's libnccl.so.2 dependency is the copy the runtime loaded first. */
  ncclbind_library_info nccl;
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &nccl), NCCLBIND_OK);
  CHECK_STR_EQ(nccl.path, nccl_real_path);
  printf(
      "PASS nccl_ep_load_test with-stub: libnccl_ep %d.%d.%d (%d) cuda %d.%d %s at %s, on libnccl "
      "%d.%d.%d\n",
      info.major, info.minor, info.patch, info.version_code, info.cuda_major, info.cuda_minor,
      info.cuda_variant, info.path, nccl.major, nccl.minor, nccl.patch);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = test_input(argc, argv, 1, "NCCLBIND_TEST_EP_MODE");
  const char *ep_library = test_input(argc, argv, 2, "NCCLBIND_TEST_NCCL_EP_LIB");
  const char *nccl_library = test_input(argc, argv, 3, "NCCLBIND_TEST_NCCL_LIB");
  if (strcmp(mode, "missing-cuda") == 0) return missing_cuda(ep_library, nccl_library);
  CHECK(strcmp(mode, "with-stub") == 0, "unknown mode %s", mode);
  int expected_version = atoi(test_input(argc, argv, 4, "NCCLBIND_TEST_NCCL_EP_VERSION"));
  return with_stub(ep_library, nccl_library, expected_version,
                   test_input(argc, argv, 5, "NCCLBIND_TEST_CUDA_STUB"));
}
