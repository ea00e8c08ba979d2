/* A library that lacks a function: the error names the function, the version
 * that has it (or, for one a newer release removed, the release that removed it and the
 * releases that have it), the loaded version and the loaded path.
 * Usage: missing_symbol_test FAKE_LIBNCCL (built from fake_nccl.c: NCCL 2.27.0,
 * exports only ncclGetVersion) */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>

#include "check.h"
#include "ncclbind/runtime.h"

static ncclbind_symbol get_version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 2000, 0};
static ncclbind_symbol comm_shrink_slot = {NULL, "ncclCommShrink", NCCLBIND_LIB_NCCL, 22800, 0};
static ncclbind_symbol comm_grow_slot = {NULL, "ncclCommGrow", NCCLBIND_LIB_NCCL, 0, 0};
/* first in 2.24.3, removed in 2.26.0: the 2.27.0 library is past its end */
static ncclbind_symbol reset_debug_slot = {NULL, "ncclResetDebugInit", NCCLBIND_LIB_NCCL, 22403, 22600};

int main(int argc, char **argv) {
  const char *library = test_input(argc, argv, 1, "NCCLBIND_TEST_FAKE_NCCL_LIB");
  char real_path[PATH_MAX];
  CHECK(realpath(library, real_path), "realpath(%s) failed", library);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, library), NCCLBIND_OK);

  CHECK(!ncclbind_symbol_get(&comm_shrink_slot),
        "ncclCommShrink resolved from a library without it");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_SYMBOL_NOT_FOUND);
  char expected[PATH_MAX + 200];
  snprintf(
      expected, sizeof expected,
      "ncclCommShrink is not in the loaded libnccl 2.27.0 (%s); it first appears in NCCL 2.28.0",
      real_path);
  CHECK_STR_EQ(ncclbind_last_error(), expected);
  printf("ok %s\n", ncclbind_last_error());
  CHECK(atomic_load(&comm_shrink_slot.fn) == NULL, "the slot of a missing function was filled");

  /* Unknown since_version: no claim about where the function appears. */
  CHECK(!ncclbind_symbol_get(&comm_grow_slot), "ncclCommGrow resolved from a library without it");
  snprintf(expected, sizeof expected, "ncclCommGrow is not in the loaded libnccl 2.27.0 (%s)",
           real_path);
  CHECK_STR_EQ(ncclbind_last_error(), expected);

  /* A function removed before the loaded release: the error says so, not "first appears". */
  CHECK(!ncclbind_symbol_get(&reset_debug_slot), "ncclResetDebugInit resolved from a library without it");
  snprintf(expected, sizeof expected,
           "ncclResetDebugInit is not in the loaded libnccl 2.27.0 (%s); it was removed in NCCL 2.26.0 "
           "(a release from 2.24.3 to before 2.26.0 has it)",
           real_path);
  CHECK_STR_EQ(ncclbind_last_error(), expected);

  /* resolve_all: the missing function is not an error there. */
  ncclbind_clear_error();
  ncclbind_symbol *table[] = {&get_version_slot, &comm_shrink_slot, &comm_grow_slot, NULL};
  CHECK_INT_EQ(ncclbind_resolve_all(table), 1);
  CHECK_STR_EQ(ncclbind_last_error(), "");
  CHECK(atomic_load(&get_version_slot.fn) != NULL, "ncclGetVersion was not resolved");

  ncclbind_library_info info;
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info), NCCLBIND_OK);
  CHECK_INT_EQ(info.version_code, 22700);
  CHECK_INT_EQ(info.major, 2);
  CHECK_INT_EQ(info.minor, 27);
  CHECK_INT_EQ(info.patch, 0);
  CHECK_STR_EQ(info.path, real_path);
  CHECK_STR_EQ(info.cuda_variant, ""); /* no "+cuda" banner in this library */
  CHECK_INT_EQ(info.cuda_major, 0);
  CHECK_INT_EQ(info.cuda_minor, 0);

  /* The library has neither ncclGetErrorString nor ncclGetLastError. */
  CHECK_STR_EQ(ncclbind_result_description(4), "an argument passed to NCCL is invalid");
  CHECK_STR_EQ(ncclbind_nccl_last_error(), "");
  printf("PASS missing_symbol_test\n");
  return 0;
}
