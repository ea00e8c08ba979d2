/* The communicator registry: every communicator the process makes, with its rank, size, a
 * key all its ranks agree on (for the trace to match calls across processes) and how it was
 * made; in checkpoint mode (NCCLBIND_SHIM_CHECKPOINT=1) the program holds virtual handles
 * (entries of this registry) and prepare/restore destroy and re-create the real ones behind
 * them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ncclbind_shim/shim_internal.h"

#define EXPORT __attribute__((visibility("default")))
#define MAGIC 0x6e627368696d636dULL /* "nbshimcm" */
#define UNIQUE_ID_BYTES 128         /* ncclUniqueId (NCCL_UNIQUE_ID_BYTES) */
#define CONFIG_MAX 4096

typedef struct comm {
  uint64_t magic;
  void *real; /* NULL between prepare and restore, or once destroyed */
  int alive;  /* not destroyed by the program */
  int rank, nranks, device;
  uint64_t key; /* the same on every rank of this communicator */
  uint64_t seq; /* order of creation in this process */
  int lineage;
  const char *made_by;
  unsigned char config[CONFIG_MAX];
  size_t config_size;
  int blocking;
  int registrations;
  unsigned splits, shrinks; /* children made from it so far */
  uint64_t parent_key;
  struct comm *next;
} comm;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static comm *comms; /* newest first */
static uint64_t made_count;
static unsigned restores;
static int prepared;

void nb_shim_lock_all(void) {
  pthread_mutex_lock(&registry_lock);
}
void nb_shim_unlock_all(void) {
  pthread_mutex_unlock(&registry_lock);
}

static uint64_t fnv(uint64_t h, const void *data, size_t size) {
  const unsigned char *p = data;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
#define FNV0 0xcbf29ce484222325ULL

static comm *virtual_of(void *handle) {
  comm *c = handle;
  return c && c->magic == MAGIC ? c : NULL;
}

/* The entry of a program's handle: itself in checkpoint mode, else found by the real handle.
 * Called with registry_lock held. */
static comm *entry_of(void *program_comm) {
  if (nb_shim_virtual) return virtual_of(program_comm);
  for (comm *c = comms; c; c = c->next)
    if (c->alive && c->real == program_comm) return c;
  return NULL;
}

void *nb_shim_real_comm(void *program_comm) {
  comm *c = virtual_of(program_comm);
  return c ? __atomic_load_n(&c->real, __ATOMIC_ACQUIRE) : program_comm;
}

typedef int (*comm_int_fn)(void *comm, int *out);
static int ask(const char *function, void *real, int fallback) {
  nb_shim_fn *fn = nb_shim_find(function);
  void *next = fn ? nb_shim_next(fn) : NULL;
  int value = fallback;
  ++nb_shim_depth;
  if (next && ((comm_int_fn)next)(real, &value) != 0) value = fallback;
  --nb_shim_depth;
  return value;
}

void nb_shim_comm_json(const void *program_comm, char *out, size_t size) {
  const comm *c = program_comm;
  snprintf(out, size,
           "{\"type\":\"comm\",\"comm\":\"0x%" PRIxPTR "\",\"real\":\"0x%" PRIxPTR "\",\"key\":\"%016" PRIx64
           "\",\"parent_key\":\"%016" PRIx64 "\",\"rank\":%d,\"nranks\":%d,\"device\":%d,\"by\":\"%s\",\"seq\":%" PRIu64
           ",\"t\":%" PRIu64 "}",
           (uintptr_t)(nb_shim_virtual ? (const void *)c : c->real), (uintptr_t)c->real, c->key, c->parent_key, c->rank,
           c->nranks, c->device, c->made_by, c->seq, nb_shim_now());
}

void nb_shim_comms_describe(void (*emit)(const char *line)) {
  char line[512];
  pthread_mutex_lock(&registry_lock);
  comm *order[4096];
  int n = 0;
  for (comm *c = comms; c && n < 4096; c = c->next)
    if (c->alive) order[n++] = c;
  for (int i = n - 1; i >= 0; --i) {
    nb_shim_comm_json(order[i], line, sizeof line);
    emit(line);
  }
  pthread_mutex_unlock(&registry_lock);
}

static comm *add(void *real, const nb_shim_made *made, nb_shim_fn *fn, int index) {
  comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = MAGIC;
  c->real = real;
  c->alive = 1;
  c->lineage = made->lineage;
  c->made_by = fn->name;
  c->blocking = 1;
  c->rank = ask("ncclCommUserRank", real, made->rank);
  c->nranks = ask("ncclCommCount", real, made->nranks);
  c->device = ask("ncclCommCuDevice", real, -1);
  if (made->config) {
    size_t size = *(const size_t *)made->config;
    c->config_size = size > CONFIG_MAX ? CONFIG_MAX : size;
    memcpy(c->config, made->config, c->config_size);
    if (c->config_size >= 20) c->blocking = ((const int *)made->config)[4];
  }
  pthread_mutex_lock(&registry_lock);
  comm *parent = made->program_parent ? entry_of(made->program_parent) : NULL;
  c->seq = made_count++;
  switch (made->lineage) {
    case NB_SHIM_MADE_INIT:
    case NB_SHIM_MADE_INIT_CONFIG:
    case NB_SHIM_MADE_INIT_SCALABLE:
    case NB_SHIM_MADE_GROW:
      c->key = made->unique_id ? fnv(FNV0, made->unique_id, UNIQUE_ID_BYTES) : FNV0;
      break;
    case NB_SHIM_MADE_SPLIT: {
      unsigned n = parent ? parent->splits++ : 0;
      c->parent_key = parent ? parent->key : 0;
      c->key = fnv(fnv(fnv(c->parent_key, "split", 5), &n, sizeof n), &made->color, sizeof made->color);
      break;
    }
    case NB_SHIM_MADE_SHRINK: {
      unsigned n = parent ? parent->shrinks++ : 0;
      c->parent_key = parent ? parent->key : 0;
      c->key = fnv(fnv(c->parent_key, "shrink", 6), &n, sizeof n);
      break;
    }
    default: {
      long pid = (long)getpid();
      c->key = fnv(fnv(fnv(FNV0, &pid, sizeof pid), &c->seq, sizeof c->seq), &index, sizeof index);
    }
  }
  c->next = comms;
  comms = c;
  pthread_mutex_unlock(&registry_lock);
  return c;
}

int nb_shim_comm_made(nb_shim_fn *fn, nb_shim_made *made, int result) {
  if ((result != 0 && result != NB_SHIM_IN_PROGRESS) || !made->out) return result;
  if (!nb_shim_virtual && !nb_shim_recording()) return result; /* off: inert, no NCCL call of ours */
  const int count = made->lineage == NB_SHIM_MADE_INIT_ALL ? made->out_count : 1;
  void **out = made->out;
  for (int i = 0; i < count; ++i) {
    if (!out[i]) continue; /* a split with NCCL_SPLIT_NOCOLOR makes none */
    comm *c = add(out[i], made, fn, i);
    if (!c) return 2; /* ncclSystemError: out of memory */
    if (nb_shim_virtual) out[i] = c;
    if (nb_shim_recording()) {
      char line[512];
      nb_shim_comm_json(c, line, sizeof line);
      nb_shim_emit_line(line, 1);
    }
  }
  return result;
}

void nb_shim_comm_ends(nb_shim_fn *fn, void *program_comm, int result) {
  if (result != 0) return;
  pthread_mutex_lock(&registry_lock);
  comm *c = entry_of(program_comm);
  if (c) {
    c->alive = 0;
    __atomic_store_n(&c->real, NULL, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&registry_lock);
  if (c && nb_shim_recording()) {
    char line[256];
    snprintf(line, sizeof line, "{\"type\":\"end\",\"comm\":\"0x%" PRIxPTR "\",\"by\":\"%s\",\"t\":%" PRIu64 "}",
             (uintptr_t)program_comm, fn->name, nb_shim_now());
    nb_shim_emit_line(line, 0);
  }
}

void nb_shim_registered(void *program_comm, int delta) {
  pthread_mutex_lock(&registry_lock);
  comm *c = entry_of(program_comm);
  if (c) c->registrations += delta;
  pthread_mutex_unlock(&registry_lock);
}

/* ---- Checkpoint ---------------------------------------------------------- */
typedef int (*comm_fn)(void *comm);
typedef int (*async_error_fn)(void *comm, int *error);
typedef int (*unique_id_fn)(void *id);
typedef int (*group_fn)(void);
typedef struct unique_id {
  char bytes[UNIQUE_ID_BYTES];
} unique_id;
typedef int (*init_config_fn)(void **comm, int nranks, unique_id id, int rank, void *config);
typedef int (*init_fn)(void **comm, int nranks, unique_id id, int rank);

static void *next_of(const char *name) {
  nb_shim_fn *fn = nb_shim_find(name);
  return fn ? nb_shim_next(fn) : NULL;
}

static const char *result_name(int r) {
  return r >= 0 && r < nb_shim_result_count ? nb_shim_result_names[r] : "an unknown ncclResult_t";
}

/* Wait for a non-blocking communicator's pending work (ncclInProgress) to end. */
static int settle(comm *c, void *real, int r) {
  async_error_fn async = (async_error_fn)next_of("ncclCommGetAsyncError");
  while (r == NB_SHIM_IN_PROGRESS && async) {
    int state = 0;
    r = async(real, &state);
    if (r == 0) r = state;
    if (r == NB_SHIM_IN_PROGRESS) usleep(100);
  }
  (void)c;
  return r;
}

/* Live entries in creation order (oldest first). Called with registry_lock held. */
static int live_in_order(comm **order, int capacity, int with_real) {
  int n = 0;
  for (comm *c = comms; c && n < capacity; c = c->next)
    if (c->alive && (with_real ? c->real != NULL : c->real == NULL)) order[n++] = c;
  for (int i = 0; i < n / 2; ++i) {
    comm *t = order[i];
    order[i] = order[n - 1 - i];
    order[n - 1 - i] = t;
  }
  return n;
}

EXPORT int ncclbind_shim_checkpoint_enabled(void) {
  return nb_shim_virtual;
}

EXPORT int ncclbind_shim_live_comms(void) {
  int n = 0;
  pthread_mutex_lock(&registry_lock);
  for (comm *c = comms; c; c = c->next) n += c->alive && c->real != NULL;
  pthread_mutex_unlock(&registry_lock);
  return n;
}

static int checkpoint_prepare(void) {
  if (!nb_shim_virtual) {
    nb_shim_set_error(
        "checkpoint mode is off: start the process with NCCLBIND_SHIM_CHECKPOINT=1 (the program must "
        "hold the shim's handles from the first communicator on)");
    return NCCLBIND_SHIM_ESTATE;
  }
  comm_fn finalize = (comm_fn)next_of("ncclCommFinalize");
  comm_fn destroy = (comm_fn)next_of("ncclCommDestroy");
  if (!destroy) {
    nb_shim_set_error("the loaded libnccl has no ncclCommDestroy");
    return NCCLBIND_SHIM_ESTATE;
  }
  static comm *order[4096];
  pthread_mutex_lock(&registry_lock);
  if (prepared) {
    pthread_mutex_unlock(&registry_lock);
    nb_shim_set_error("a checkpoint is already prepared: restore it first");
    return NCCLBIND_SHIM_ESTATE;
  }
  const int n = live_in_order(order, 4096, 1);
  /* Refuse before destroying anything: nothing half-done. */
  for (int i = 0; i < n; ++i) {
    comm *c = order[i];
    if (c->registrations > 0) {
      pthread_mutex_unlock(&registry_lock);
      nb_shim_set_error(
          "communicator %p (rank %d of %d, made by %s) has %d live buffer/window registration(s), which "
          "a re-created communicator would not have: deregister them before the checkpoint",
          (void *)c, c->rank, c->nranks, c->made_by, c->registrations);
      return NCCLBIND_SHIM_ESTATE;
    }
    if (c->lineage == NB_SHIM_MADE_INIT_ALL || c->lineage == NB_SHIM_MADE_INIT_SCALABLE ||
        c->lineage == NB_SHIM_MADE_GROW) {
      pthread_mutex_unlock(&registry_lock);
      nb_shim_set_error(
          "communicator %p (rank %d of %d) was made by %s, which the checkpoint cannot re-create "
          "(ncclCommInitRank/Config, Split and Shrink are supported)",
          (void *)c, c->rank, c->nranks, c->made_by);
      return NCCLBIND_SHIM_ESTATE;
    }
  }
  for (int i = n - 1; i >= 0; --i) { /* children before their parents */
    comm *c = order[i];
    void *real = c->real;
    int r = finalize ? finalize(real) : 0;
    if (r == NB_SHIM_IN_PROGRESS || (r == 0 && !c->blocking)) r = settle(c, real, r);
    if (r == 0) r = destroy(real);
    if (r != 0) {
      pthread_mutex_unlock(&registry_lock);
      nb_shim_set_error(
          "%s failed on communicator %p (rank %d of %d, made by %s): %s (%d); %d of %d communicators "
          "were destroyed before it",
          finalize ? "ncclCommFinalize/ncclCommDestroy" : "ncclCommDestroy", (void *)c, c->rank, c->nranks, c->made_by,
          result_name(r), r, n - 1 - i, n);
      return r;
    }
    __atomic_store_n(&c->real, NULL, __ATOMIC_RELEASE);
  }
  prepared = 1;
  pthread_mutex_unlock(&registry_lock);
  return 0;
}

/* Make the device the communicator was on current (through the driver: a process that
 * loaded the CUDA runtime privately still has the driver). */
static void use_device(int device) {
  if (device < 0) return;
  void *driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
  if (!driver) return;
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(driver, "cuDeviceGet");
  int (*retain)(void **, int) = (int (*)(void **, int))dlsym(driver, "cuDevicePrimaryCtxRetain");
  int (*set)(void *) = (int (*)(void *))dlsym(driver, "cuCtxSetCurrent");
  int handle;
  void *context;
  if (get && retain && set && get(&handle, device) == 0 && retain(&context, handle) == 0) set(context);
}

static int checkpoint_restore(void) {
  unique_id_fn get_id = (unique_id_fn)next_of("ncclGetUniqueId");
  init_config_fn init_config = (init_config_fn)next_of("ncclCommInitRankConfig");
  init_fn init = (init_fn)next_of("ncclCommInitRank");
  group_fn group_start = (group_fn)next_of("ncclGroupStart"), group_end = (group_fn)next_of("ncclGroupEnd");
  if (!get_id || !init || !group_start || !group_end) {
    nb_shim_set_error("the loaded libnccl lacks ncclGetUniqueId, ncclCommInitRank or ncclGroupStart/End");
    return NCCLBIND_SHIM_ESTATE;
  }
  static comm *order[4096];
  static unique_id ids[4096];
  pthread_mutex_lock(&registry_lock);
  if (!prepared) {
    pthread_mutex_unlock(&registry_lock);
    nb_shim_set_error("no checkpoint is prepared: call ncclbind_shim_checkpoint_prepare first");
    return NCCLBIND_SHIM_ESTATE;
  }
  const int n = live_in_order(order, 4096, 0);
  const unsigned generation = restores;
  /* Fresh unique ids: rank 0 of each communicator makes one and publishes it under a key
   * every rank computes alike (the communicator's key and the restore's generation). */
  for (int i = 0; i < n; ++i) {
    comm *c = order[i];
    char key[96];
    snprintf(key, sizeof key, "ncclbind-shim-%016" PRIx64 "-%u", c->key, generation);
    int r = 0;
    if (c->rank == 0) {
      r = get_id(&ids[i]);
      if (r != 0) {
        pthread_mutex_unlock(&registry_lock);
        nb_shim_set_error("ncclGetUniqueId failed for communicator %p (rank 0 of %d): %s (%d)", (void *)c, c->nranks,
                          result_name(r), r);
        return r;
      }
      if (nb_shim_store_put(key, &ids[i], sizeof ids[i]) != 0) r = NCCLBIND_SHIM_EIO;
    } else if (nb_shim_store_get(key, &ids[i], sizeof ids[i]) != 0) {
      r = NCCLBIND_SHIM_EIO;
    }
    if (r != 0) {
      pthread_mutex_unlock(&registry_lock);
      char why[512];
      snprintf(why, sizeof why, "%s", ncclbind_shim_last_error());
      nb_shim_set_error("communicator %p (rank %d of %d): the unique id exchange failed: %s", (void *)c, c->rank,
                        c->nranks, why);
      return r;
    }
  }
  void *made[4096];
  int r = group_start();
  for (int i = 0; i < n && r == 0; ++i) {
    comm *c = order[i];
    use_device(c->device);
    made[i] = NULL;
    r = c->config_size && init_config ? init_config(&made[i], c->nranks, ids[i], c->rank, c->config)
                                      : init(&made[i], c->nranks, ids[i], c->rank);
    if (r == NB_SHIM_IN_PROGRESS) r = 0;
    if (r != 0) {
      nb_shim_set_error("re-creating communicator %p (rank %d of %d, made by %s) failed: %s (%d)", (void *)c, c->rank,
                        c->nranks, c->made_by, result_name(r), r);
    }
  }
  int end = group_end();
  if (r == 0 && end != 0 && end != NB_SHIM_IN_PROGRESS) {
    r = end;
    nb_shim_set_error("ncclGroupEnd around the re-creation of %d communicator(s) failed: %s (%d)", n, result_name(r),
                      r);
  }
  for (int i = 0; i < n && r == 0; ++i) {
    int s = settle(order[i], made[i], NB_SHIM_IN_PROGRESS);
    if (s != 0) {
      r = s;
      nb_shim_set_error("re-created communicator %p (rank %d of %d) failed: %s (%d)", (void *)order[i], order[i]->rank,
                        order[i]->nranks, result_name(r), r);
    }
  }
  if (r == 0) {
    for (int i = 0; i < n; ++i) __atomic_store_n(&order[i]->real, made[i], __ATOMIC_RELEASE);
    prepared = 0;
    ++restores;
  }
  pthread_mutex_unlock(&registry_lock);
  return r;
}

/* The NCCL calls of the checkpoint are the shim's, not the program's: whatever libnccl calls
 * through its exported symbols meanwhile is neither recorded nor counted. */
EXPORT int ncclbind_shim_checkpoint_prepare(void) {
  ++nb_shim_depth;
  const int r = checkpoint_prepare();
  --nb_shim_depth;
  return r;
}
EXPORT int ncclbind_shim_checkpoint_restore(void) {
  ++nb_shim_depth;
  const int r = checkpoint_restore();
  --nb_shim_depth;
  return r;
}
