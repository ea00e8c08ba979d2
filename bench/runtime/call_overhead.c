/* Cost of one call to ncclGetVersion through a runtime slot
 * (ncclbind_symbol_get + indirect call) against a direct call to the function
 * this binary is linked with (through the PLT), and against a plain function
 * pointer from dlsym kept in a global.
 * Usage: call_overhead MODE CALLS [REPEATS]
 *   MODE: direct | slot | pointer | none (setup only, for instruction counts)
 *   With REPEATS (wall clock), prints the best ns/call of REPEATS runs of CALLS calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ncclbind/runtime.h"

int ncclGetVersion(int *version); /* from the libnccl.so.2 this binary links */

typedef int (*get_version_fn)(int *);
static ncclbind_symbol get_version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 0, 0};
static get_version_fn get_version_pointer;

__attribute__((noinline)) static long direct_calls(long calls) {
  long sum = 0;
  for (long i = 0; i < calls; i++) {
    int version;
    ncclGetVersion(&version);
    sum += version;
  }
  return sum;
}

__attribute__((noinline)) static long slot_calls(long calls) {
  long sum = 0;
  for (long i = 0; i < calls; i++) {
    int version;
    ((get_version_fn)ncclbind_symbol_get(&get_version_slot))(&version);
    sum += version;
  }
  return sum;
}

__attribute__((noinline)) static long pointer_calls(long calls) {
  long sum = 0;
  for (long i = 0; i < calls; i++) {
    int version;
    get_version_pointer(&version);
    sum += version;
  }
  return sum;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s direct|slot|pointer|none CALLS [REPEATS]\n", argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  long calls = atol(argv[2]);
  int repeats = argc > 3 ? atoi(argv[3]) : 0;

  /* Same setup in every mode, so that instruction counts differ only by the loop. */
  void *resolved = ncclbind_symbol_get(&get_version_slot);
  if (resolved != (void *)ncclGetVersion) {
    fprintf(stderr, "the slot resolved to %p, the linked ncclGetVersion is %p: %s\n", resolved,
            (void *)ncclGetVersion, ncclbind_last_error());
    return 1;
  }
  get_version_pointer = (get_version_fn)dlsym(RTLD_DEFAULT, "ncclGetVersion");
  int version = 0;
  ncclGetVersion(&version);

  long (*loop)(long);
  if (strcmp(mode, "direct") == 0)
    loop = direct_calls;
  else if (strcmp(mode, "slot") == 0)
    loop = slot_calls;
  else if (strcmp(mode, "pointer") == 0)
    loop = pointer_calls;
  else if (strcmp(mode, "none") == 0)
    return 0;
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }

  if (repeats <= 0) {
    long sum = loop(calls);
    return sum == (long)version * calls ? 0 : 1;
  }
  double best = 0;
  for (int r = 0; r < repeats; r++) {
    double start = now_ns();
    long sum = loop(calls);
    double elapsed = now_ns() - start;
    if (sum != (long)version * calls) return 1;
    if (r == 0 || elapsed < best) best = elapsed;
  }
  printf("%.3f\n", best / (double)calls);
  return 0;
}
