/* Loads a real libnccl through an explicit path and checks what the runtime
 * reports about it.
 * Usage: library_load_test LIBNCCL EXPECTED_VERSION_CODE EXPECTED_CUDA_VARIANT */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include "check.h"
#include "ncclbind/runtime.h"

typedef const char *(*get_error_string_fn)(int);

static ncclbind_symbol get_version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol get_error_string_slot = {NULL, "ncclGetErrorString", NCCLBIND_LIB_NCCL, 0, 0};

int main(int argc, char **argv) {
  const char *library = test_input(argc, argv, 1, "NCCLBIND_TEST_NCCL_LIB");
  int expected_version = atoi(test_input(argc, argv, 2, "NCCLBIND_TEST_NCCL_VERSION"));
  const char *expected_variant = test_input(argc, argv, 3, "NCCLBIND_TEST_CUDA_VARIANT");
  char real_path[PATH_MAX];
  CHECK(realpath(library, real_path), "realpath(%s) failed", library);

  CHECK(!dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_NOW),
        "libnccl is in the process before the test loads it");
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_OK);

  ncclbind_library_info info;
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info), NCCLBIND_OK);
  CHECK_INT_EQ(info.loaded, 1);
  CHECK_INT_EQ(info.version_code, expected_version);
  int major, minor, patch;
  ncclbind_decode_version(expected_version, &major, &minor, &patch);
  CHECK_INT_EQ(info.major, major);
  CHECK_INT_EQ(info.minor, minor);
  CHECK_INT_EQ(info.patch, patch);
  CHECK_STR_EQ(info.path, real_path);
  CHECK_STR_EQ(info.cuda_variant, expected_variant);
  CHECK_INT_EQ(info.cuda_major, atoi(expected_variant + 2));
  CHECK(info.cuda_minor >= 0 && info.cuda_minor < 100, "cuda_minor = %d", info.cuda_minor);

  /* The slot calls the same function the library exports. */
  int (*get_version)(int *) = (int (*)(int *))ncclbind_symbol_get(&get_version_slot);
  CHECK(get_version, "ncclGetVersion did not resolve: %s", ncclbind_last_error());
  void *handle = dlopen(real_path, RTLD_NOLOAD | RTLD_NOW);
  CHECK(handle, "the library is not in the process: %s", dlerror());
  CHECK((void *)get_version == dlsym(handle, "ncclGetVersion"), "slot and dlsym disagree");
  int version = 0;
  CHECK_INT_EQ(get_version(&version), 0);
  CHECK_INT_EQ(version, expected_version);

  /* Loaded: descriptions come from the library itself. */
  get_error_string_fn get_error_string =
      (get_error_string_fn)ncclbind_symbol_get(&get_error_string_slot);
  CHECK(get_error_string, "ncclGetErrorString did not resolve: %s", ncclbind_last_error());
  for (int code = 1; code < 8; code++)
    CHECK_STR_EQ(ncclbind_result_description(code), get_error_string(code));

  /* Too late to change where the library comes from. */
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, "/elsewhere/libnccl.so.2"),
               NCCLBIND_ERROR_STATE);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_STATE);
  CHECK_CONTAINS(ncclbind_last_error(), real_path);
  CHECK_INT_EQ(ncclbind_add_search_dir(NCCLBIND_LIB_NCCL, "/elsewhere"), NCCLBIND_ERROR_STATE);
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info), NCCLBIND_OK);
  CHECK_STR_EQ(info.path, real_path);

  printf("PASS library_load_test: libnccl %d.%d.%d (%d) cuda %d.%d %s at %s\n", info.major,
         info.minor, info.patch, info.version_code, info.cuda_major, info.cuda_minor,
         info.cuda_variant, info.path);
  return 0;
}
