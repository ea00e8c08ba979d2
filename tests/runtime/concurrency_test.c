/* Many threads hit the same unresolved slots at once, so the first load and
 * every resolution race. Each round runs in a fresh child process (the
 * library loads once per process); every thread must see the same pointers,
 * equal to dlsym's, and its own last error for the missing function.
 * Usage: concurrency_test LIBNCCL [ROUNDS] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ncclbind/runtime.h"

enum { THREADS = 16, CALLS_PER_THREAD = 2000 };

#define SLOT(name) \
  { NULL, name, NCCLBIND_LIB_NCCL, 0, 0 }
static ncclbind_symbol slots[] = {
    SLOT("ncclGetVersion"),     SLOT("ncclGetUniqueId"),  SLOT("ncclCommInitRank"),
    SLOT("ncclCommDestroy"),    SLOT("ncclAllReduce"),    SLOT("ncclBroadcast"),
    SLOT("ncclGetErrorString"), SLOT("ncclGetLastError"), SLOT("ncclCommCount"),
    SLOT("ncclGroupStart"),     SLOT("ncclGroupEnd"),
};
enum { SLOT_COUNT = sizeof slots / sizeof slots[0] };
static ncclbind_symbol missing_slot = {NULL, "ncclDoesNotExistAnywhere", NCCLBIND_LIB_NCCL, 29900, 0};

static pthread_barrier_t start_line;

typedef struct thread_result {
  void *seen[SLOT_COUNT];
  int inconsistent;
  int missing_error_ok;
  int info_ok;
} thread_result;

static void *hammer(void *argument) {
  thread_result *result = argument;
  pthread_barrier_wait(&start_line);
  for (int call = 0; call < CALLS_PER_THREAD; call++) {
    for (int i = 0; i < SLOT_COUNT; i++) {
      int slot = (i + call) % SLOT_COUNT;
      void *fn = ncclbind_symbol_get(&slots[slot]);
      if (!result->seen[slot]) result->seen[slot] = fn;
      if (!fn || fn != result->seen[slot]) result->inconsistent++;
    }
    if (call % 500 == 0) {
      ncclbind_clear_error();
      void *fn = ncclbind_symbol_get(&missing_slot);
      result->missing_error_ok =
          !fn && ncclbind_last_error_code() == NCCLBIND_ERROR_SYMBOL_NOT_FOUND &&
          strstr(ncclbind_last_error(), "ncclDoesNotExistAnywhere is not in the loaded libnccl") &&
          strstr(ncclbind_last_error(), "it first appears in NCCL 2.99.0");
      ncclbind_library_info info;
      result->info_ok = ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info) == NCCLBIND_OK &&
                        info.version_code > 0 && info.cuda_major > 0;
    }
  }
  return NULL;
}

static void *hammer_resolve_all(void *argument) {
  thread_result *result = argument;
  ncclbind_symbol *table[SLOT_COUNT + 2];
  for (int i = 0; i < SLOT_COUNT; i++) table[i] = &slots[i];
  table[SLOT_COUNT] = &missing_slot;
  table[SLOT_COUNT + 1] = NULL;
  pthread_barrier_wait(&start_line);
  if (ncclbind_resolve_all(table) != SLOT_COUNT) result->inconsistent++;
  for (int i = 0; i < SLOT_COUNT; i++) result->seen[i] = atomic_load(&slots[i].fn);
  result->missing_error_ok = result->info_ok = 1;
  return NULL;
}

static int one_round(const char *library) {
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, library), NCCLBIND_OK);
  CHECK_INT_EQ(pthread_barrier_init(&start_line, NULL, THREADS), 0);
  pthread_t threads[THREADS];
  static thread_result results[THREADS];
  for (int t = 0; t < THREADS; t++)
    CHECK_INT_EQ(
        pthread_create(&threads[t], NULL, t % 4 == 3 ? hammer_resolve_all : hammer, &results[t]),
        0);
  for (int t = 0; t < THREADS; t++) CHECK_INT_EQ(pthread_join(threads[t], NULL), 0);

  void *handle = dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_NOW);
  CHECK(handle, "libnccl is not loaded after the threads ran");
  for (int i = 0; i < SLOT_COUNT; i++) {
    void *expected = dlsym(handle, slots[i].name);
    CHECK(expected && atomic_load(&slots[i].fn) == expected, "slot %s holds %p, dlsym says %p",
          slots[i].name, atomic_load(&slots[i].fn), expected);
    for (int t = 0; t < THREADS; t++)
      CHECK(results[t].seen[i] == expected, "thread %d saw %p for %s, dlsym says %p", t,
            results[t].seen[i], slots[i].name, expected);
  }
  for (int t = 0; t < THREADS; t++) {
    CHECK(results[t].inconsistent == 0, "thread %d saw %d NULL or changing pointers", t,
          results[t].inconsistent);
    CHECK(results[t].missing_error_ok,
          "thread %d did not get its own error for the missing function", t);
    CHECK(results[t].info_ok, "thread %d: ncclbind_get_library_info failed", t);
  }
  CHECK(atomic_load(&missing_slot.fn) == NULL, "the missing function's slot was filled");
  return 0;
}

int main(int argc, char **argv) {
  const char *library = test_input(argc, argv, 1, "NCCLBIND_TEST_NCCL_LIB");
  int rounds = argc > 2 ? atoi(argv[2]) : 10;
  for (int round = 0; round < rounds; round++) {
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0, "fork failed");
    if (child == 0) _exit(one_round(library));
    int status = 0;
    CHECK_INT_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d failed (wait status 0x%x)",
          round, status);
  }
  printf("PASS concurrency_test: %d rounds x %d threads x %d calls x %d slots\n", rounds, THREADS,
         CALLS_PER_THREAD, SLOT_COUNT);
  return 0;
}
