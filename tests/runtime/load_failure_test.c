/* Loads that fail, and what the runtime says about them: a path that does not
 * exist, a file that is not a library, an ordered search that finds nothing,
 * a message too long for the buffer, bad arguments; then a retry that works.
 * Usage: load_failure_test LIBNCCL */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ncclbind/runtime.h"

static ncclbind_symbol get_version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 0, 0};

static void make_temp_dir(char *out, size_t size, const char *name) {
  const char *base = getenv("TEST_TMPDIR");
  snprintf(out, size, "%s/%s.XXXXXX", base && base[0] ? base : "/tmp", name);
  CHECK(mkdtemp(out), "mkdtemp(%s) failed", out);
}

static void check_in_order(const char *text, const char *const *needles) {
  const char *cursor = text;
  for (; *needles; needles++) {
    const char *found = strstr(cursor, *needles);
    CHECK(found, "\"%s\" is missing or out of order in:\n%s", *needles, text);
    cursor = found + strlen(*needles);
  }
}

static void nonexistent_explicit_path(void) {
  const char *path = "/nonexistent/ncclbind-test/libnccl.so.2";
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, path), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  const char *message = ncclbind_last_error();
  const char *order[] = {"libnccl could not be loaded",
                         "1. libnccl.so.2 [already in this process]: not loaded",
                         "2. /nonexistent/ncclbind-test/libnccl.so.2 [ncclbind_set_library_path]: "
                         "cannot open shared object file: No such file or directory",
                         "no other location was searched", NULL};
  check_in_order(message, order);

  /* A wrapper's slot fails the same way and says why. */
  CHECK(!ncclbind_symbol_get(&get_version_slot), "resolved from a library that did not load");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_CONTAINS(ncclbind_last_error(), path);
  printf("ok nonexistent explicit path:\n%s\n", message);
}

static void not_a_library(const char *temp_dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/libnccl.so.2", temp_dir);
  FILE *file = fopen(path, "w");
  CHECK(file, "cannot create %s", path);
  fputs("This is a text file, not a shared library. It is long enough to hold an ELF header.\n",
        file);
  fclose(file);

  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, NULL), NCCLBIND_OK);
  CHECK_INT_EQ(setenv("NCCLBIND_NCCL_PATH", path, 1), 0);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  const char *message = ncclbind_last_error();
  CHECK_CONTAINS(message, path);
  CHECK_CONTAINS(message, "[NCCLBIND_NCCL_PATH]");
  CHECK_CONTAINS(message, "invalid ELF header");
  CHECK_INT_EQ(unsetenv("NCCLBIND_NCCL_PATH"), 0);
  printf("ok not a library:\n%s\n", message);
}

static void search_finds_nothing(const char *dir1, const char *dir2) {
  CHECK_INT_EQ(ncclbind_add_search_dir(NCCLBIND_LIB_NCCL_EP, dir1), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_add_search_dir(NCCLBIND_LIB_NCCL_EP, dir2), NCCLBIND_OK);
  CHECK_INT_EQ(setenv("CUDA_HOME", "/nonexistent/ncclbind-cuda", 1), 0);
  CHECK_INT_EQ(unsetenv("NCCLBIND_NCCL_EP_PATH"), 0);
  int status = ncclbind_load(NCCLBIND_LIB_NCCL_EP);
  if (status == NCCLBIND_OK) {
    printf("SKIP ordered search: this machine has a libnccl_ep the dynamic loader finds\n");
    return;
  }
  CHECK_INT_EQ(status, NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  const char *message = ncclbind_last_error();
  char first[4200], second[4200];
  snprintf(first, sizeof first,
           "%s/libnccl_ep.so [ncclbind_add_search_dir]: cannot open shared object file", dir1);
  snprintf(second, sizeof second,
           "%s/libnccl_ep.so [ncclbind_add_search_dir]: cannot open shared object file", dir2);
  const char *order[] = {
      "libnccl_ep could not be loaded",
      "libnccl_ep.so [already in this process]: not loaded",
      "libnccl_ep.so.0 [already in this process]: not loaded",
      first,
      second,
      "/nonexistent/ncclbind-cuda/lib/libnccl_ep.so [CUDA_HOME]: cannot open",
      "/nonexistent/ncclbind-cuda/lib/libnccl_ep.so.0 [CUDA_HOME]: cannot open",
      "/nonexistent/ncclbind-cuda/lib64/libnccl_ep.so [CUDA_HOME]: cannot open",
      "/nonexistent/ncclbind-cuda/lib64/libnccl_ep.so.0 [CUDA_HOME]: cannot open",
      "libnccl_ep.so [dynamic loader search]: cannot open shared object file",
      "libnccl_ep.so.0 [dynamic loader search]: cannot open shared object file",
      NULL};
  check_in_order(message, order);
  printf("ok ordered search:\n%s\n", message);
}

static void message_too_long(void) {
  char dir[300];
  memset(dir, 'x', sizeof dir - 1);
  dir[0] = '/';
  dir[sizeof dir - 1] = '\0';
  for (int i = 0; i < 100; i++)
    CHECK_INT_EQ(ncclbind_add_search_dir(NCCLBIND_LIB_NCCL_EP, dir), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  const char *message = ncclbind_last_error();
  size_t length = strlen(message);
  CHECK(length == 8191, "a truncated message should fill the 8 KiB buffer, it has %zu bytes",
        length);
  CHECK(strcmp(message + length - 3, "...") == 0, "the cut is not marked: ends with \"%s\"",
        message + length - 10);
  CHECK_CONTAINS(message, "libnccl_ep could not be loaded");
  printf("ok message too long: cut at %zu bytes, ends with \"...\"\n", length);
}

static void bad_arguments(void) {
  CHECK_INT_EQ(ncclbind_load((ncclbind_lib)7), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_INT_EQ(ncclbind_load((ncclbind_lib)-1), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_COUNT, "x"), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_INT_EQ(ncclbind_add_search_dir(NCCLBIND_LIB_NCCL, ""), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_INT_EQ(ncclbind_add_search_dir(NCCLBIND_LIB_NCCL, NULL), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, NULL), NCCLBIND_ERROR_INVALID_ARGUMENT);
  CHECK(!ncclbind_resolve(NULL), "resolved a NULL slot");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_INVALID_ARGUMENT);
  ncclbind_symbol nameless = {NULL, NULL, NCCLBIND_LIB_NCCL, 0, 0};
  CHECK(!ncclbind_resolve(&nameless), "resolved a slot without a name");
  ncclbind_symbol bad_lib = {NULL, "ncclGetVersion", (ncclbind_lib)9, 0, 0};
  CHECK(!ncclbind_resolve(&bad_lib), "resolved a slot of an unknown library");
  CHECK_INT_EQ(ncclbind_resolve_all(NULL), 0);
  ncclbind_register_table(NCCLBIND_LIB_NCCL, NULL);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_INVALID_ARGUMENT);
  printf("ok bad arguments\n");
}

static void retry_succeeds(const char *library) {
  CHECK(!dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_NOW), "libnccl was loaded by a failed attempt");
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, library), NCCLBIND_OK);
  int (*get_version)(int *) = (int (*)(int *))ncclbind_symbol_get(&get_version_slot);
  CHECK(get_version, "ncclGetVersion did not resolve after the path was fixed: %s",
        ncclbind_last_error());
  int version = 0;
  CHECK_INT_EQ(get_version(&version), 0);
  CHECK(version > 0, "version %d", version);
  printf("ok retry after fixing the path: libnccl %d\n", version);
}

int main(int argc, char **argv) {
  const char *library = test_input(argc, argv, 1, "NCCLBIND_TEST_NCCL_LIB");
  CHECK_STR_EQ(ncclbind_last_error(), "");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_OK);
  char temp_dir[4096], empty_dir1[4096], empty_dir2[4096];
  make_temp_dir(temp_dir, sizeof temp_dir, "not_a_library");
  make_temp_dir(empty_dir1, sizeof empty_dir1, "empty1");
  make_temp_dir(empty_dir2, sizeof empty_dir2, "empty2");

  nonexistent_explicit_path();
  not_a_library(temp_dir);
  bad_arguments();
  retry_succeeds(library);
  search_finds_nothing(empty_dir1, empty_dir2);
  message_too_long();
  ncclbind_clear_error();
  CHECK_STR_EQ(ncclbind_last_error(), "");
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_OK);
  printf("PASS load_failure_test\n");
  return 0;
}
