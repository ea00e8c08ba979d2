/* What the generated wrappers (bindings/shim/src/nccl_shim.c) and the hand-written
 * recorder, communicator registry and checkpoint (shim/src/) share. Not installed: the
 * public control API is ncclbind_shim/shim.h. */
#ifndef NCCLBIND_SHIM_INTERNAL_H_
#define NCCLBIND_SHIM_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ncclbind_shim/shim.h"

enum { NB_SHIM_OFF = NCCLBIND_SHIM_OFF, NB_SHIM_COUNTS = NCCLBIND_SHIM_COUNTS, NB_SHIM_FULL = NCCLBIND_SHIM_FULL };
enum { NB_SHIM_BUS_NONE, NB_SHIM_BUS_ONE, NB_SHIM_BUS_N1_N, NB_SHIM_BUS_2N1_N };
enum {
  NB_SHIM_HAS_BUFFERS = 1,
  NB_SHIM_HAS_OP = 2,
  NB_SHIM_HAS_ROOT = 4,
  NB_SHIM_HAS_PEER = 8,
  NB_SHIM_HAS_STREAM = 16,
};
#define NB_SHIM_NO_RESULT (-1)
#define NB_SHIM_IN_PROGRESS 7 /* ncclInProgress: a non-blocking call under way, not a failure */

/* One exported function: its next definition (one atomic slot, resolved on first use, as the
 * runtime's loader does) and its counters. */
typedef struct nb_shim_fn {
  const char *name;
  unsigned char bus, bus_total;
  void *next;      /* atomic */
  int missing;     /* atomic: the warning was printed */
  uint64_t calls;  /* atomic, relaxed */
  uint64_t errors; /* atomic, relaxed */
  uint64_t bytes;  /* atomic, relaxed */
} nb_shim_fn;

/* What one call meant, for the full mode's record; `has` says which fields hold. */
typedef struct nb_shim_call {
  void *comm; /* the program's handle */
  const void *send, *recv;
  size_t count;
  int dtype, op, rank_arg;
  unsigned has;
  void *stream;
  void *gpu; /* the CUDA event pair of the GPU time, or NULL */
} nb_shim_call;

enum {
  NB_SHIM_MADE_INIT = 1,
  NB_SHIM_MADE_INIT_CONFIG,
  NB_SHIM_MADE_INIT_SCALABLE,
  NB_SHIM_MADE_INIT_ALL,
  NB_SHIM_MADE_SPLIT,
  NB_SHIM_MADE_SHRINK,
  NB_SHIM_MADE_GROW,
};

/* How a communicator was made: filled by the wrapper from nccl_shim.toml's [made] fields. */
typedef struct nb_shim_made {
  int lineage;
  void *out;     /* ncclComm_t * the call wrote */
  int out_count; /* init_all: how many */
  int nranks, rank;
  const void *unique_id; /* ncclUniqueId * (init_scalable: the first of its ids) */
  const void *config;    /* ncclConfig_t * or NULL */
  void *parent;          /* the real parent handle */
  void *program_parent;  /* the parent handle the program passed */
  int color, key;
  const void *exclude;
  int exclude_count, flags;
} nb_shim_made;

/* Set by the generated file of the release. */
extern nb_shim_fn nb_shim_functions[];
extern const int nb_shim_function_count;
extern const char nb_shim_release[];
extern const int nb_shim_release_code;
extern const char *const nb_shim_dtype_names[];
extern const unsigned char nb_shim_dtype_bytes[];
extern const int nb_shim_dtype_count;
extern const char *const nb_shim_op_names[];
extern const int nb_shim_op_count;
extern const char *const nb_shim_result_names[];
extern const int nb_shim_result_count;

/* The mode (NB_SHIM_OFF/_COUNTS/_FULL) or'ed with NB_SHIM_GATE_VIRTUAL in checkpoint mode, in
 * one word: 0 lets a wrapper forward at once (one relaxed load, then a tail call). */
extern int nb_shim_gate; /* atomic */
#define NB_SHIM_GATE_MODE 3
#define NB_SHIM_GATE_VIRTUAL 4
extern int nb_shim_virtual; /* set once at load: checkpoint mode (virtual handles) */
/* How deep this thread is inside NCCL through the shim: a wrapper entered at depth > 0 was
 * called by libnccl itself through its exported symbol (ncclBcast calls ncclBroadcast) or by
 * the shim's own NCCL calls (the checkpoint), so it forwards as it is: no record, no counter,
 * no handle translation (it holds the real communicator already). Kept only while the gate is
 * not 0 (off without checkpoint forwards at once, and a nested call would do nothing more).
 * initial-exec: one %fs-relative access, no __tls_get_addr on every call. */
extern __thread int nb_shim_depth __attribute__((tls_model("initial-exec")));

void *nb_shim_resolve(nb_shim_fn *fn);
void nb_shim_missing(nb_shim_fn *fn);
nb_shim_fn *nb_shim_find(const char *name);

static inline void *nb_shim_next(nb_shim_fn *fn) {
  void *next = __atomic_load_n(&fn->next, __ATOMIC_ACQUIRE);
  return __builtin_expect(next != NULL, 1) ? next : nb_shim_resolve(fn);
}
static inline int nb_shim_gate_now(void) {
  return __atomic_load_n(&nb_shim_gate, __ATOMIC_RELAXED);
}
static inline int nb_shim_mode_now(void) {
  return nb_shim_gate_now() & NB_SHIM_GATE_MODE;
}
static inline int nb_shim_virtual_now(void) {
  return nb_shim_virtual;
}

static inline void nb_shim_count(nb_shim_fn *fn, int result, size_t count, int dtype) {
  __atomic_fetch_add(&fn->calls, 1, __ATOMIC_RELAXED);
  if (result > 0 && result != NB_SHIM_IN_PROGRESS) __atomic_fetch_add(&fn->errors, 1, __ATOMIC_RELAXED);
  if (dtype >= 0 && dtype < nb_shim_dtype_count && count)
    __atomic_fetch_add(&fn->bytes, (uint64_t)count * nb_shim_dtype_bytes[dtype], __ATOMIC_RELAXED);
}

static inline uint64_t nb_shim_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* Full mode: the call about to be made, written into this thread's ring at its head (a call
 * still inside NCCL after NCCLBIND_SHIM_PENDING_MS is written as pending: a hung rank shows
 * where it hangs), then, once it returned, its result and end time, which publish it. */
void nb_shim_enter(nb_shim_fn *fn, const nb_shim_call *call, uint64_t t0);
void nb_shim_record(int result, uint64_t t1);
void nb_shim_group(int delta);
void *nb_shim_gpu_begin(void *stream);
void nb_shim_gpu_end(void *pair, void *stream);

/* The communicator registry (comms.c). */
void *nb_shim_real_comm(void *program_comm);
int nb_shim_comm_made(nb_shim_fn *fn, nb_shim_made *made, int result);
void nb_shim_comm_ends(nb_shim_fn *fn, void *program_comm, int result);
void nb_shim_registered(void *program_comm, int delta);

/* Shared between the recorder and the registry. */
void nb_shim_set_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* One JSONL line, under the recorder's lock; described_on_open: the line describes a live
 * communicator, which opening the trace file writes anyway. */
void nb_shim_emit_line(const char *line, int described_on_open);
int nb_shim_recording(void);
void nb_shim_comms_describe(void (*emit)(const char *line)); /* every live communicator */
void nb_shim_comm_json(const void *program_comm, char *out, size_t size);
void nb_shim_lock_all(void);
void nb_shim_unlock_all(void);

/* The store that exchanges unique ids at restore (store.c): 0 or -1 with the error set. */
int nb_shim_store_put(const char *key, const void *value, size_t size);
int nb_shim_store_get(const char *key, void *value, size_t size);

#endif
