/* Calls real NCCL functions through runtime slots: ncclGetUniqueId works
 * without a GPU; ncclCommInitRank on a machine without one fails with a real
 * NCCL error that the runtime names and NCCL explains.
 * Usage: nccl_calls_test LIBNCCL */
#include <stdio.h>

#include "check.h"
#include "ncclbind/runtime.h"

typedef struct {
  char internal[128];
} unique_id; /* ncclUniqueId */

static ncclbind_symbol get_unique_id_slot = {NULL, "ncclGetUniqueId", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol comm_init_rank_slot = {NULL, "ncclCommInitRank", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol comm_destroy_slot = {NULL, "ncclCommDestroy", NCCLBIND_LIB_NCCL, 0, 0};

int main(int argc, char **argv) {
  const char *library = test_input(argc, argv, 1, "NCCLBIND_TEST_NCCL_LIB");
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, library), NCCLBIND_OK);
  CHECK_STR_EQ(ncclbind_nccl_last_error(), ""); /* not loaded yet */

  int (*get_unique_id)(unique_id *) =
      (int (*)(unique_id *))ncclbind_symbol_get(&get_unique_id_slot);
  CHECK(get_unique_id, "ncclGetUniqueId did not resolve: %s", ncclbind_last_error());
  unique_id id;
  memset(&id, 0, sizeof id);
  int result = get_unique_id(&id);
  CHECK(result == 0, "ncclGetUniqueId returned %d %s: %s (NCCL: %s)", result,
        ncclbind_result_name(result), ncclbind_result_description(result),
        ncclbind_nccl_last_error());
  int nonzero = 0;
  for (size_t i = 0; i < sizeof id.internal; i++) nonzero += id.internal[i] != 0;
  CHECK(nonzero > 0, "the unique id is 128 zero bytes");

  int (*comm_init_rank)(void **, int, unique_id, int) =
      (int (*)(void **, int, unique_id, int))ncclbind_symbol_get(&comm_init_rank_slot);
  CHECK(comm_init_rank, "ncclCommInitRank did not resolve: %s", ncclbind_last_error());
  void *comm = NULL;
  result = comm_init_rank(&comm, 1, id, 0);
  if (result == 0) {
    /* A machine with a GPU: the one-rank communicator is real. */
    int (*comm_destroy)(void *) = (int (*)(void *))ncclbind_symbol_get(&comm_destroy_slot);
    CHECK(comm_destroy, "ncclCommDestroy did not resolve: %s", ncclbind_last_error());
    CHECK_INT_EQ(comm_destroy(comm), 0);
    printf(
        "PASS nccl_calls_test: unique id has %d nonzero bytes; ncclCommInitRank succeeded (GPU "
        "present)\n",
        nonzero);
    return 0;
  }
  const char *name = ncclbind_result_name(result);
  CHECK(result > 0 && result < 16, "ncclCommInitRank returned %d (%s), not an ncclResult_t", result,
        name);
  CHECK(strncmp(name, "nccl", 4) == 0, "code %d maps to \"%s\"", result, name);
  const char *nccl_text = ncclbind_nccl_last_error();
  CHECK(nccl_text[0] != '\0', "ncclGetLastError gave no text after %s", name);
  printf(
      "PASS nccl_calls_test: unique id has %d nonzero bytes; ncclCommInitRank -> %d %s (%s); NCCL "
      "says: %s\n",
      nonzero, result, name, ncclbind_result_description(result), nccl_text);
  return 0;
}
