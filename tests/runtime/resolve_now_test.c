/* NCCLBIND_RESOLVE_NOW: registered tables are resolved as soon as their
 * library loads; without it slots stay empty until first use. Each case runs
 * in a child process, since the library loads once per process.
 * Usage: resolve_now_test LIBNCCL */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ncclbind/runtime.h"

static ncclbind_symbol get_version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol all_reduce_slot = {NULL, "ncclAllReduce", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol missing_slot = {NULL, "ncclDoesNotExistAnywhere", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol ep_slot = {NULL, "ncclEpGetVersion", NCCLBIND_LIB_NCCL_EP, 0, 0};
static ncclbind_symbol late_slot = {NULL, "ncclCommCount", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol *const early_table[] = {&get_version_slot, &all_reduce_slot, &missing_slot,
                                               &ep_slot, NULL};
static ncclbind_symbol *const late_table[] = {&late_slot, NULL};

static int is_set(ncclbind_symbol *slot) {
  return atomic_load(&slot->fn) != NULL;
}

static int run_case(const char *library, const char *env_value) {
  if (env_value)
    CHECK_INT_EQ(setenv("NCCLBIND_RESOLVE_NOW", env_value, 1), 0);
  else
    CHECK_INT_EQ(unsetenv("NCCLBIND_RESOLVE_NOW"), 0);
  int eager = env_value && strcmp(env_value, "1") == 0;

  ncclbind_register_table(NCCLBIND_LIB_NCCL, early_table);
  CHECK(!dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_NOW), "registering a table loaded libnccl");
  CHECK(!is_set(&get_version_slot), "a slot was resolved before the library loaded");
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_OK);

  CHECK_INT_EQ(is_set(&get_version_slot), eager);
  CHECK_INT_EQ(is_set(&all_reduce_slot), eager);
  CHECK(!is_set(&missing_slot), "the missing function's slot was filled");
  CHECK(!is_set(&ep_slot), "a libnccl_ep slot was resolved when libnccl loaded");
  CHECK(!dlopen("libnccl_ep.so", RTLD_NOLOAD | RTLD_NOW), "libnccl_ep got loaded");
  CHECK_STR_EQ(ncclbind_last_error(), ""); /* a missing function is not an error here */

  ncclbind_register_table(NCCLBIND_LIB_NCCL, late_table);
  CHECK_INT_EQ(is_set(&late_slot), eager);

  /* Either way the slots work on first use. */
  CHECK(ncclbind_symbol_get(&all_reduce_slot), "ncclAllReduce: %s", ncclbind_last_error());
  CHECK(ncclbind_symbol_get(&late_slot), "ncclCommCount: %s", ncclbind_last_error());
  printf("ok NCCLBIND_RESOLVE_NOW=%s: slots %s at load\n", env_value ? env_value : "(unset)",
         eager ? "resolved" : "left for first use");
  return 0;
}

int main(int argc, char **argv) {
  const char *library = test_input(argc, argv, 1, "NCCLBIND_TEST_NCCL_LIB");
  const char *cases[] = {"1", NULL, "0"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0, "fork failed");
    if (child == 0) {
      int status = run_case(library, cases[i]);
      fflush(stdout);
      _exit(status);
    }
    int status = 0;
    CHECK_INT_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "case NCCLBIND_RESOLVE_NOW=%s failed",
          cases[i] ? cases[i] : "(unset)");
  }
  printf("PASS resolve_now_test\n");
  return 0;
}
