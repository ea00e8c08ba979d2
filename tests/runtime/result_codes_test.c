/* Result-code names and descriptions, version decoding and the thread-local
 * last error, with no library loaded (none of these may load one).
 * Usage: result_codes_test */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

#include "check.h"
#include "ncclbind/runtime.h"

static void check_names(void) {
  static const char *const nccl_names[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};
  for (int code = 0; code < 9; code++) {
    CHECK_STR_EQ(ncclbind_result_name(code), nccl_names[code]);
    const char *description = ncclbind_result_description(code);
    CHECK(description[0] && !strstr(description, "unknown"), "code %d: description \"%s\"", code,
          description);
  }
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_OK), "ncclSuccess");
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_ERROR_LIBRARY_NOT_FOUND),
               "NCCLBIND_ERROR_LIBRARY_NOT_FOUND");
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_ERROR_SYMBOL_NOT_FOUND),
               "NCCLBIND_ERROR_SYMBOL_NOT_FOUND");
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_ERROR_INVALID_ARGUMENT),
               "NCCLBIND_ERROR_INVALID_ARGUMENT");
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_ERROR_STATE), "NCCLBIND_ERROR_STATE");
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_ERROR_FOREIGN_EXCEPTION), "NCCLBIND_ERROR_FOREIGN_EXCEPTION");
  CHECK_CONTAINS(ncclbind_result_description(NCCLBIND_ERROR_LIBRARY_NOT_FOUND),
                 "could not be loaded");
  CHECK_STR_EQ(ncclbind_result_description(4), "an argument passed to NCCL is invalid");

  const int unknown[] = {9, 42, -1, INT_MIN, INT_MAX, 0x4E420000, 0x4E420006, 0x4E420099};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    char expected[64];
    snprintf(expected, sizeof expected, "unknown result code %d", unknown[i]);
    CHECK_STR_EQ(ncclbind_result_name(unknown[i]), expected);
    CHECK_STR_EQ(ncclbind_result_description(unknown[i]), expected);
  }
  /* Name and description of one unknown code can be used together. */
  const char *name = ncclbind_result_name(42), *description = ncclbind_result_description(43);
  CHECK_STR_EQ(name, "unknown result code 42");
  CHECK_STR_EQ(description, "unknown result code 43");
}

static void check_versions(void) {
  const struct {
    int code, major, minor, patch;
  } cases[] = {{2708, 2, 7, 8},   {2800, 2, 8, 0},   {20900, 2, 9, 0},
               {21003, 2, 10, 3}, {22809, 2, 28, 9}, {23203, 2, 32, 3},
               {30000, 3, 0, 0},  {0, 0, 0, 0},      {-5, 0, 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int major = -1, minor = -1, patch = -1;
    ncclbind_decode_version(cases[i].code, &major, &minor, &patch);
    CHECK(major == cases[i].major && minor == cases[i].minor && patch == cases[i].patch,
          "%d decoded as %d.%d.%d, expected %d.%d.%d", cases[i].code, major, minor, patch,
          cases[i].major, cases[i].minor, cases[i].patch);
  }
  int minor = 0;
  ncclbind_decode_version(22809, NULL, &minor, NULL);
  CHECK_INT_EQ(minor, 28);
}

static void *other_thread(void *unused) {
  (void)unused;
  /* Another thread's last error and unknown-code texts are its own. */
  CHECK_STR_EQ(ncclbind_last_error(), "");
  CHECK_STR_EQ(ncclbind_result_name(7777), "unknown result code 7777");
  ncclbind_set_invalid_argument("from the other thread");
  return NULL;
}

static void check_last_error(void) {
  CHECK_STR_EQ(ncclbind_last_error(), "");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_set_invalid_argument("count must be positive, got %d", -3),
               NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_STR_EQ(ncclbind_last_error(), "count must be positive, got -3");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_INVALID_ARGUMENT);
  const char *name = ncclbind_result_name(1234);

  pthread_t thread;
  CHECK_INT_EQ(pthread_create(&thread, NULL, other_thread, NULL), 0);
  CHECK_INT_EQ(pthread_join(thread, NULL), 0);
  CHECK_STR_EQ(ncclbind_last_error(), "count must be positive, got -3");
  CHECK_STR_EQ(name, "unknown result code 1234");

  static char long_text[20000];
  memset(long_text, 'a', sizeof long_text - 1);
  ncclbind_set_invalid_argument("%s", long_text);
  const char *message = ncclbind_last_error();
  size_t length = strlen(message);
  CHECK(length == 8191, "a truncated message should fill the 8 KiB buffer, it has %zu bytes",
        length);
  CHECK(strcmp(message + length - 3, "...") == 0, "the cut is not marked");
  CHECK(message[length - 4] == 'a', "the text before the mark is lost");

  ncclbind_clear_error();
  CHECK_STR_EQ(ncclbind_last_error(), "");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_OK);
}

int main(void) {
  check_names();
  check_versions();
  check_last_error();
  CHECK_STR_EQ(ncclbind_nccl_last_error(), "");
  CHECK(!dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_NOW), "a libnccl got loaded");
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, "/not/loaded/yet"), NCCLBIND_OK);
  printf("PASS result_codes_test\n");
  return 0;
}
