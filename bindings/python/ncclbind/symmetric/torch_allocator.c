/* torch's pluggable-allocator entry points over ncclMemAlloc / ncclMemFree, so that a
 * torch.cuda.MemPool hands out memory NCCL can register as a symmetric window
 * (ncclbind.symmetric.torch_pool). torch.cuda.memory.CUDAPluggableAllocator loads this
 * file's shared object and calls the two functions below by name.
 *
 * NCCL is reached through ncclbind's runtime (runtime/include/ncclbind/runtime.h): the
 * libnccl already in the process (the one ncclbind's extension loaded) comes first, so
 * this copy of the runtime and the extension's use the same library. Built by setup.py
 * as ncclbind/symmetric/_torch_allocator*.so, with hidden visibility: only the functions
 * marked EXPORT are seen outside. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <ncclbind/runtime.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*mem_alloc_fn)(void **ptr, size_t size);
typedef int (*mem_free_fn)(void *ptr);

static ncclbind_symbol mem_alloc_symbol = {NULL, "ncclMemAlloc", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol mem_free_symbol = {NULL, "ncclMemFree", NCCLBIND_LIB_NCCL, 0, 0};

static atomic_long allocations, frees, failures;
static atomic_int last_result;

/* The blocks allocated and not yet freed, in allocation order (seq), so that every rank
 * registers its windows in the same order: window registration is collective. */
typedef struct live_block {
  void *ptr;
  size_t size;
  long seq;
} live_block;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static live_block *live;
static size_t live_count, live_capacity;
static long next_seq;

static void remember(void *ptr, size_t size) {
  pthread_mutex_lock(&live_lock);
  if (live_count == live_capacity) {
    size_t capacity = live_capacity ? 2 * live_capacity : 64;
    live_block *grown = realloc(live, capacity * sizeof *live);
    if (grown) live = grown, live_capacity = capacity;
  }
  if (live_count < live_capacity) live[live_count++] = (live_block){ptr, size, next_seq++};
  pthread_mutex_unlock(&live_lock);
}

static void forget(void *ptr) {
  pthread_mutex_lock(&live_lock);
  for (size_t i = 0; i < live_count; i++) {
    if (live[i].ptr == ptr) {
      memmove(&live[i], &live[i + 1], (live_count - i - 1) * sizeof *live);
      live_count--;
      break;
    }
  }
  pthread_mutex_unlock(&live_lock);
}

/* Copies up to `capacity` live blocks, oldest first, into the three arrays; returns how many
 * blocks are live (call again with a larger capacity when that is more). */
EXPORT size_t ncclbind_symmetric_live_blocks(void **ptrs, size_t *sizes, long *seqs, size_t capacity) {
  pthread_mutex_lock(&live_lock);
  size_t n = live_count;
  for (size_t i = 0; i < n && i < capacity; i++) {
    ptrs[i] = live[i].ptr;
    sizes[i] = live[i].size;
    seqs[i] = live[i].seq;
  }
  pthread_mutex_unlock(&live_lock);
  return n;
}

/* A data pointer to a function pointer without the cast ISO C leaves undefined. */
static void *function_of(ncclbind_symbol *symbol) { return ncclbind_symbol_get(symbol); }

/* torch calls it with the device current (its allocator sets the device first): ncclMemAlloc
 * allocates on the current device. NULL tells torch the allocation failed (it raises
 * OutOfMemoryError); ncclbind_symmetric_last_result() keeps NCCL's code. */
EXPORT void *ncclbind_symmetric_alloc(ssize_t size, int device, void *stream) {
  (void)device;
  (void)stream; /* ncclMemAlloc is synchronous */
  void *entry = function_of(&mem_alloc_symbol);
  if (!entry || size < 0) {
    atomic_store(&last_result, entry ? NCCLBIND_ERROR_INVALID_ARGUMENT : ncclbind_last_error_code());
    atomic_fetch_add(&failures, 1);
    return NULL;
  }
  mem_alloc_fn alloc;
  memcpy(&alloc, &entry, sizeof alloc);
  void *ptr = NULL;
  int result = alloc(&ptr, size > 0 ? (size_t)size : 1);
  atomic_store(&last_result, result);
  if (result != 0 || !ptr) {
    atomic_fetch_add(&failures, 1);
    return NULL;
  }
  atomic_fetch_add(&allocations, 1);
  remember(ptr, size > 0 ? (size_t)size : 1);
  return ptr;
}

EXPORT void ncclbind_symmetric_free(void *ptr, ssize_t size, int device, void *stream) {
  (void)size;
  (void)device;
  (void)stream;
  if (!ptr) return;
  forget(ptr);
  void *entry = function_of(&mem_free_symbol);
  if (!entry) {
    atomic_store(&last_result, ncclbind_last_error_code());
    atomic_fetch_add(&failures, 1);
    return;
  }
  mem_free_fn release;
  memcpy(&release, &entry, sizeof release);
  int result = release(ptr);
  atomic_store(&last_result, result);
  if (result != 0) atomic_fetch_add(&failures, 1);
  else atomic_fetch_add(&frees, 1);
}

/* What happened so far: successful allocations and frees, and failed calls. */
EXPORT void ncclbind_symmetric_counts(long *allocated, long *freed, long *failed) {
  *allocated = atomic_load(&allocations);
  *freed = atomic_load(&frees);
  *failed = atomic_load(&failures);
}

/* NCCL's result of the last call (or the runtime's NCCLBIND_ERROR_* code when libnccl or
 * the function could not be found); ncclbind_symmetric_last_error() says why then. */
EXPORT int ncclbind_symmetric_last_result(void) { return atomic_load(&last_result); }
EXPORT const char *ncclbind_symmetric_last_error(void) { return ncclbind_last_error(); }
