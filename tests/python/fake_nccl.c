/* A stand-in libnccl.so.2 for the CPU tests of the Pythonic layer: it claims
 * NCCL 2.28.9 and runs every collective of a one-rank communicator on host
 * memory with memcpy (the "device pointers" the tests pass are host
 * addresses behind __cuda_array_interface__ stand-ins). Communicators of
 * more ranks only check arguments. Nothing here is real NCCL. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

enum { ok = 0, invalid_argument = 4, invalid_usage = 5, in_progress = 7 };

typedef struct fake_unique_id { /* ncclUniqueId, passed by value */
  char internal[128];
} fake_unique_id;

typedef struct fake_comm {
  int nranks, rank, device;
  int destroyed;
  int destroy_calls, abort_calls; /* every call, also on a destroyed comm (fakeCommCalls) */
  int init_polls;                 /* ncclInProgress answers left; -1: until destroyed */
  int inside;                     /* calls between their argument check and their return */
  int revoked;                    /* ncclCommRevoke was called */
} fake_comm;

static const size_t type_size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static char last_error[256] = "";
static double premulsum_scalar[64];
static int next_op = 5;

/* Pending sends and receives of the current group (one-rank comms only). */
static struct {
  const void *send;
  void *recv;
  size_t bytes;
} pending;
static int group_depth;

/* What the tests read back through ctypes: one line per call of the grouped
 * point-to-point family ("send ptr count type peer", "recv ...", "reduce ptr ptr
 * count type op root", "group_start", "group_end"), cleared by fakeClearCallLog. */
static char call_log[1 << 16];
static size_t call_log_used;
static void log_call(const char *format, ...) __attribute__((format(printf, 1, 2)));
API const char *fakeCallLog(void) { return call_log; }
API void fakeClearCallLog(void) {
  call_log_used = 0;
  call_log[0] = 0;
}
/* fakeHangNextAllReduce: the next ncclAllReduce blocks until its communicator is
 * aborted (a call that never completes, for the watchdog tests). */
static volatile int hang_next_all_reduce;
API void fakeHangNextAllReduce(void) { hang_next_all_reduce = 1; }
/* fakeNextInitInProgress: the next non-blocking ncclCommInitRankConfig (config blocking = 0)
 * returns ncclInProgress, and ncclCommGetAsyncError answers ncclInProgress `polls` times
 * (-1: until the communicator is aborted) before ncclSuccess. */
static int next_init_polls;
API void fakeNextInitInProgress(int polls) { __atomic_store_n(&next_init_polls, polls, __ATOMIC_RELEASE); }
/* fakeCommCalls: how often ncclCommDestroy and ncclCommAbort were called with `comm`
 * (communicators are never freed, so this can be asked after either). */
API void fakeCommCalls(const fake_comm *comm, int *destroys, int *aborts) {
  *destroys = __atomic_load_n(&comm->destroy_calls, __ATOMIC_ACQUIRE);
  *aborts = __atomic_load_n(&comm->abort_calls, __ATOMIC_ACQUIRE);
}

/* fakeUsedAfterFree: how many calls were given a destroyed communicator, plus how many
 * ncclCommDestroy calls came while another call was inside the same communicator (which real
 * NCCL would free under it). fakeSetCallDelay: every call that checks a communicator stays
 * inside it that many microseconds, so that a destroy from another thread can land there. */
static int used_after_free, call_delay_us;
API int fakeUsedAfterFree(void) { return __atomic_load_n(&used_after_free, __ATOMIC_ACQUIRE); }
API void fakeSetCallDelay(int microseconds) { __atomic_store_n(&call_delay_us, microseconds, __ATOMIC_RELEASE); }

/* fakeSetLastError: what ncclGetLastError answers until the next failure sets it (NCCL keeps one
 * text per process that every warning overwrites, such as one logged while an EP group is made). */
API void fakeSetLastError(const char *text) {
  memset(last_error, 0, sizeof last_error);
  strncpy(last_error, text ? text : "", sizeof last_error - 1);
}

static int fail(int code, const char *what) {
  strncpy(last_error, what, sizeof last_error - 1);
  return code;
}

static void log_call(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(call_log + call_log_used, sizeof call_log - call_log_used, format, args);
  va_end(args);
  if (n > 0 && call_log_used + (size_t)n < sizeof call_log) call_log_used += (size_t)n;
}

static int check(fake_comm *c, int datatype) {
  if (c && __atomic_load_n(&c->destroyed, __ATOMIC_ACQUIRE)) __atomic_add_fetch(&used_after_free, 1, __ATOMIC_ACQ_REL);
  if (!c || c->destroyed) return fail(invalid_argument, "fake: invalid communicator");
  int delay = __atomic_load_n(&call_delay_us, __ATOMIC_ACQUIRE);
  if (delay > 0) {
    __atomic_add_fetch(&c->inside, 1, __ATOMIC_ACQ_REL);
    usleep((useconds_t)delay);
    __atomic_sub_fetch(&c->inside, 1, __ATOMIC_ACQ_REL);
  }
  if (datatype < 0 || datatype > 11) return fail(invalid_argument, "fake: invalid datatype");
  return ok;
}

/* NCCLBIND_FAKE_NCCL_VERSION (a version code) makes it claim another version, for tests of
 * what the binding chooses by version alone (layouts, stamps); its calls stay 2.28.9's. */
API int ncclGetVersion(int *version) {
  const char *claimed = getenv("NCCLBIND_FAKE_NCCL_VERSION");
  *version = claimed && *claimed ? atoi(claimed) : 22809;
  return ok;
}
API const char *ncclGetErrorString(int result) { return result == ok ? "no error" : "fake error"; }
API const char *ncclGetLastError(void *comm) {
  (void)comm;
  return last_error;
}
API int ncclGetUniqueId(void *id) {
  memset(id, 0, 128);
  memcpy(id, "fake-nccl-id", 12);
  return ok;
}

static fake_comm *last_comm;
/* fakeLastComm: the communicator made last (for one that a failed constructor did not hand out). */
API fake_comm *fakeLastComm(void) { return __atomic_load_n(&last_comm, __ATOMIC_ACQUIRE); }

static int make(fake_comm **out, int nranks, int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return fail(invalid_argument, "fake: bad nranks/rank");
  fake_comm *c = calloc(1, sizeof *c);
  c->nranks = nranks;
  c->rank = rank;
  *out = c;
  __atomic_store_n(&last_comm, c, __ATOMIC_RELEASE);
  return ok;
}

API int ncclCommInitRank(fake_comm **comm, int nranks, fake_unique_id id, int rank) {
  if (memcmp(id.internal, "fake-nccl-id", 12) != 0) return fail(invalid_argument, "fake: not a fake unique id");
  return make(comm, nranks, rank);
}
API int ncclCommInitRankConfig(fake_comm **comm, int nranks, fake_unique_id id, int rank, void *config) {
  if (memcmp(id.internal, "fake-nccl-id", 12) != 0) return fail(invalid_argument, "fake: not a fake unique id");
  /* ncclConfig_t 2.28.9: size, magic, version; the binding must stamp 22809. */
  if (config && ((unsigned *)config)[3] != 22809) return fail(invalid_argument, "fake: config version is not 22809");
  int made = make(comm, nranks, rank);
  int polls = __atomic_exchange_n(&next_init_polls, 0, __ATOMIC_ACQ_REL);
  if (made != ok || !polls || ((int *)config)[4] != 0) return made; /* [4]: blocking */
  (*comm)->init_polls = polls;
  return in_progress;
}
API int ncclCommInitRankScalable(fake_comm **comm, int nranks, int rank, int nids, void *ids, void *config) {
  (void)ids;
  (void)config;
  if (nids < 1) return fail(invalid_argument, "fake: no ids");
  return make(comm, nranks, rank);
}
API int ncclCommInitAll(fake_comm **comms, int ndev, const int *devlist) {
  for (int i = 0; i < ndev; ++i) {
    make(&comms[i], ndev, i);
    comms[i]->device = devlist ? devlist[i] : i;
  }
  return ok;
}
API int ncclCommSplit(fake_comm *comm, int color, int key, fake_comm **out, void *config) {
  (void)key;
  (void)config;
  if (color == -1) {
    *out = NULL;
    return ok;
  }
  return make(out, 1, 0) == ok ? ((*out)->device = comm->device, ok) : invalid_argument;
}
API int ncclCommShrink(fake_comm *comm, int *exclude, int n, fake_comm **out, void *config, int flags) {
  (void)exclude;
  (void)config;
  (void)flags;
  return make(out, comm->nranks - n, 0);
}
API int ncclCommFinalize(fake_comm *comm) { return check(comm, 0); }
static int release(fake_comm *comm) {
  if (check(comm, 0)) return invalid_argument;
  __atomic_store_n(&comm->destroyed, 1, __ATOMIC_RELEASE); /* leaked on purpose: later use must still be detectable */
  return ok;
}
API int ncclCommDestroy(fake_comm *comm) {
  if (comm) __atomic_add_fetch(&comm->destroy_calls, 1, __ATOMIC_ACQ_REL);
  if (comm && __atomic_load_n(&comm->inside, __ATOMIC_ACQUIRE)) __atomic_add_fetch(&used_after_free, 1, __ATOMIC_ACQ_REL);
  return release(comm);
}
API int ncclCommAbort(fake_comm *comm) {
  if (comm) __atomic_add_fetch(&comm->abort_calls, 1, __ATOMIC_ACQ_REL);
  /* A call inside that is not blocked (check()'s delay) would run on freed memory in NCCL. */
  if (comm && __atomic_load_n(&comm->inside, __ATOMIC_ACQUIRE)) __atomic_add_fetch(&used_after_free, 1, __ATOMIC_ACQ_REL);
  return release(comm);
}
/* As NCCL's: stops the communicator's work (a hung all-reduce returns), frees nothing. */
API int ncclCommRevoke(fake_comm *comm, int flags) {
  (void)flags;
  if (check(comm, 0)) return invalid_argument;
  __atomic_store_n(&comm->revoked, 1, __ATOMIC_RELEASE);
  return ok;
}
API int ncclCommCount(const fake_comm *comm, int *count) {
  *count = comm->nranks;
  return ok;
}
API int ncclCommUserRank(const fake_comm *comm, int *rank) {
  *rank = comm->rank;
  return ok;
}
API int ncclCommCuDevice(const fake_comm *comm, int *device) {
  *device = comm->device;
  return ok;
}
API int ncclCommGetAsyncError(fake_comm *comm, int *error) {
  *error = comm->destroyed ? invalid_usage : ok;
  if (*error == ok && comm->init_polls) {
    if (comm->init_polls > 0) --comm->init_polls;
    *error = in_progress;
  }
  return ok;
}

static void reduce_into(void *recv, const void *send, size_t count, int datatype, int op) {
  if (op >= 5 && datatype == 7) { /* PreMulSum on float32: scale the one input */
    float *r = recv;
    const float *s = send;
    for (size_t i = 0; i < count; ++i) r[i] = (float)(s[i] * premulsum_scalar[op]);
    return;
  }
  memmove(recv, send, count * type_size[datatype]);
}

API int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t)) return invalid_argument;
  if (hang_next_all_reduce) { /* counted inside: an abort freeing it under the call is seen */
    hang_next_all_reduce = 0;
    __atomic_add_fetch(&c->inside, 1, __ATOMIC_ACQ_REL);
    while (!__atomic_load_n(&c->destroyed, __ATOMIC_ACQUIRE) && !__atomic_load_n(&c->revoked, __ATOMIC_ACQUIRE))
      usleep(1000);
    __atomic_sub_fetch(&c->inside, 1, __ATOMIC_ACQ_REL);
    return fail(invalid_usage, "fake: aborted (or revoked) while the all-reduce was under way");
  }
  reduce_into(r, s, n, t, op);
  return ok;
}
API int ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t) || root >= c->nranks) return invalid_argument;
  log_call("reduce %p %p %zu %d %d %d\n", s, r, n, t, op, root);
  if (c->rank == root) reduce_into(r, s, n, t, op);
  return ok;
}
API int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, fake_comm *c, void *stream) {
  (void)stream;
  (void)root;
  if (check(c, t)) return invalid_argument;
  if (c->nranks == 1) memmove(r, s, n * type_size[t]);
  return ok;
}
/* As libnccl does: the legacy in-place broadcast calls ncclBroadcast through its exported,
 * interposable symbol (a preloaded shim sees both). */
API int ncclBcast(void *buff, size_t n, int t, int root, fake_comm *c, void *stream) {
  return ncclBroadcast(buff, buff, n, t, root, c, stream);
}
API int ncclAllGather(const void *s, void *r, size_t n, int t, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t)) return invalid_argument;
  memmove((char *)r + (size_t)c->rank * n * type_size[t], s, n * type_size[t]);
  return ok;
}
API int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t)) return invalid_argument;
  reduce_into(r, (const char *)s + (size_t)c->rank * n * type_size[t], n, t, op);
  return ok;
}
API int ncclAlltoAll(const void *s, void *r, size_t n, int t, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t)) return invalid_argument;
  if (c->nranks == 1) memmove(r, s, n * type_size[t]);
  return ok;
}
API int ncclGather(const void *s, void *r, size_t n, int t, int root, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t)) return invalid_argument;
  if (c->rank == root) memmove((char *)r + (size_t)c->rank * n * type_size[t], s, n * type_size[t]);
  return ok;
}
API int ncclScatter(const void *s, void *r, size_t n, int t, int root, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t)) return invalid_argument;
  /* Only the root's sendbuff is read (NULL elsewhere); a stand-in rank holds no other's data. */
  if (c->rank == root) memmove(r, (const char *)s + (size_t)c->rank * n * type_size[t], n * type_size[t]);
  return ok;
}
static int try_pair(void) {
  if (pending.send && pending.recv) {
    memmove(pending.recv, pending.send, pending.bytes);
    memset(&pending, 0, sizeof pending);
  }
  return ok;
}
API int ncclSend(const void *s, size_t n, int t, int peer, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t) || peer >= c->nranks) return invalid_argument;
  log_call("send %p %zu %d %d\n", s, n, t, peer);
  if (c->nranks > 1) return group_depth ? ok : invalid_usage; /* argument checks only */
  pending.send = s;
  pending.bytes = n * type_size[t];
  return group_depth ? ok : fail(invalid_usage, "fake: send to self outside a group would hang");
}
API int ncclRecv(void *r, size_t n, int t, int peer, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, t) || peer >= c->nranks) return invalid_argument;
  log_call("recv %p %zu %d %d\n", r, n, t, peer);
  if (c->nranks > 1) return group_depth ? ok : invalid_usage; /* argument checks only */
  pending.recv = r;
  pending.bytes = n * type_size[t];
  return group_depth ? ok : fail(invalid_usage, "fake: recv from self outside a group would hang");
}
API int ncclGroupStart(void) {
  log_call("group_start\n");
  ++group_depth;
  return ok;
}
API int ncclGroupEnd(void) {
  if (group_depth == 0) return fail(invalid_usage, "fake: ncclGroupEnd without ncclGroupStart");
  log_call("group_end\n");
  if (--group_depth == 0) try_pair();
  return ok;
}
API int ncclGroupSimulateEnd(void *info) {
  /* ncclSimInfo_t: size, magic, version, float estimatedTime at 16 */
  if (!info || ((unsigned *)info)[2] != 0x74685283u) return fail(invalid_argument, "fake: simInfo not initialized");
  *(float *)((char *)info + 16) = 42.0f;
  if (group_depth) --group_depth;
  memset(&pending, 0, sizeof pending);
  return ok;
}

API int ncclCommRegister(fake_comm *c, void *buff, size_t size, void **handle) {
  if (check(c, 0) || !buff || !size) return invalid_argument;
  *handle = buff;
  return ok;
}
API int ncclCommDeregister(fake_comm *c, void *handle) { return check(c, 0) || !handle ? invalid_argument : ok; }
API int ncclCommWindowRegister(fake_comm *c, void *buff, size_t size, void **win, int flags) {
  (void)flags;
  if (check(c, 0) || !buff || !size) return invalid_argument;
  *win = (char *)buff + 1;
  return ok;
}
API int ncclCommWindowDeregister(fake_comm *c, void *win) { return check(c, 0) || !win ? invalid_argument : ok; }
API int ncclRedOpCreatePreMulSum(int *op, void *scalar, int t, int residence, fake_comm *c) {
  if (check(c, t) || next_op >= 64) return invalid_argument;
  double value = 0;
  if (residence == 1 && t == 7) value = *(float *)scalar;          /* host float32 */
  else if (residence == 1 && t == 8) value = *(double *)scalar;    /* host float64 */
  else if (residence == 0 && t == 7) value = *(float *)scalar;     /* "device" = host here */
  premulsum_scalar[next_op] = value;
  *op = next_op++;
  return ok;
}
API int ncclRedOpDestroy(int op, fake_comm *c) {
  if (check(c, 0) || op < 5 || op >= next_op) return invalid_argument;
  if (op == next_op - 1) --next_op; /* the newest slot is made again, as NCCL reuses its op slots */
  return ok;
}
/* fakeMemCalls: how many ncclMemAlloc calls succeeded and how many ncclMemFree calls were
 * made; fakeFailNextMemAlloc: the next ncclMemAlloc fails (ncclSystemError). */
static int mem_allocs, mem_frees, fail_next_mem_alloc;
API void fakeMemCalls(int *allocs, int *frees) {
  *allocs = __atomic_load_n(&mem_allocs, __ATOMIC_ACQUIRE);
  *frees = __atomic_load_n(&mem_frees, __ATOMIC_ACQUIRE);
}
API void fakeFailNextMemAlloc(void) { __atomic_store_n(&fail_next_mem_alloc, 1, __ATOMIC_RELEASE); }
API int ncclMemAlloc(void **ptr, size_t size) {
  if (__atomic_exchange_n(&fail_next_mem_alloc, 0, __ATOMIC_ACQ_REL)) return fail(2, "fake: ncclMemAlloc failed");
  *ptr = calloc(1, size);
  if (*ptr) __atomic_add_fetch(&mem_allocs, 1, __ATOMIC_ACQ_REL);
  return *ptr ? ok : invalid_argument;
}
API int ncclMemFree(void *ptr) {
  __atomic_add_fetch(&mem_frees, 1, __ATOMIC_ACQ_REL);
  free(ptr);
  return ok;
}
API int ncclDevCommCreate(fake_comm *c, const void *reqs, void *out) {
  if (check(c, 0) || !reqs) return invalid_argument;
  ((int *)out)[0] = c->rank; /* ncclDevComm_t 2.28.9: rank, nRanks */
  ((int *)out)[1] = c->nranks;
  return ok;
}
API int ncclDevCommDestroy(fake_comm *c, const void *dev) { return check(c, 0) || !dev ? invalid_argument : ok; }

#ifdef FAKE_NCCL_RMA
/* Built with -DFAKE_NCCL_RMA (tests/python/test_signals.py builds this variant): NCCL 2.29.7+'s
 * window queries and one-sided calls, so that the default stand-in (2.28.9) still lacks them.
 * A window is its buffer's address + 1 (ncclCommWindowRegister above). Pointer queries: LSA
 * rank r's address is the buffer + offset + r * FAKE_LSA_STRIDE; only world rank 0 is reachable
 * by load/store (any other peer: NULL); no LSA multimem (NULL); an explicit multimem handle
 * gives its base + offset. LE info: leId 7 (multimem), 100 + peerCft, 200 + peer; leOffset the
 * offset. The one-sided calls log their arguments as NCCL receives them: "put_signal localbuff
 * count datatype peer peerWin peerWinOffset sigIdx ctx flags", "signal peer sigIdx ctx flags",
 * "wait_signal nDesc" then "desc opCnt peer sigIdx ctx" per descriptor; a put to rank 0 of a
 * one-rank communicator also copies into the window at peerWinOffset bytes. */

/* ncclCommQueryProperties (2.29.7+): the caller fills the record's header with its layout's
 * initializer; like NCCL, it is refused when the header's version stamp is newer than the
 * library, and the stand-in is stricter: the stamp must be the library's own version (the
 * claimed one), as ncclbind stamps a layout for the loaded release. */
typedef struct fake_properties_head {
  size_t size;
  unsigned magic, version;
  int rank, nRanks;
} fake_properties_head;
API int ncclCommQueryProperties(fake_comm *c, fake_properties_head *props) {
  if (check(c, 0) || !props) return invalid_argument;
  int library;
  ncclGetVersion(&library);
  if (props->magic != 0xcafebeefu) return fail(invalid_argument, "fake: the properties' magic is not set");
  if ((int)props->version != library) {
    snprintf(last_error, sizeof last_error, "fake: properties stamped %u, the library is %d", props->version,
             library);
    return invalid_usage;
  }
  props->rank = c->rank;
  props->nRanks = c->nranks;
  return ok;
}
#define FAKE_LSA_STRIDE ((size_t)1 << 20)
typedef struct fake_team { int nRanks, rank, stride; } fake_team;  /* ncclTeam_t, by value */
typedef struct fake_multimem { void *mcBasePtr; } fake_multimem;   /* ncclMultimemHandle_t, by value */
static char *window_base(void *win) { return (char *)win - 1; }
API int ncclGetLsaDevicePointer(void *win, size_t offset, int lsaRank, void **out) {
  if (!win || !out || lsaRank < 0) return fail(invalid_argument, "fake: ncclGetLsaDevicePointer");
  *out = window_base(win) + offset + (size_t)lsaRank * FAKE_LSA_STRIDE;
  return ok;
}
API int ncclGetPeerDevicePointer(void *win, size_t offset, int peer, void **out) {
  if (!win || !out || peer < 0) return fail(invalid_argument, "fake: ncclGetPeerDevicePointer");
  *out = peer == 0 ? window_base(win) + offset : NULL;
  return ok;
}
API int ncclGetLsaMultimemDevicePointer(void *win, size_t offset, void **out) {
  (void)offset;
  if (!win || !out) return fail(invalid_argument, "fake: ncclGetLsaMultimemDevicePointer");
  *out = NULL;
  return ok;
}
API int ncclGetMultimemDevicePointer(void *win, size_t offset, fake_multimem multimem, void **out) {
  if (!win || !out) return fail(invalid_argument, "fake: ncclGetMultimemDevicePointer");
  *out = multimem.mcBasePtr ? (char *)multimem.mcBasePtr + offset : NULL;
  return ok;
}
API int ncclGetMultimemDeviceLeInfo(void *win, size_t offset, uint32_t *leId, size_t *leOffset) {
  if (!win || !leId || !leOffset) return fail(invalid_argument, "fake: ncclGetMultimemDeviceLeInfo");
  *leId = 7;
  *leOffset = offset;
  return ok;
}
API int ncclGetCftDeviceLeInfo(void *win, size_t offset, int peerCft, fake_team team, uint32_t *leId,
                               size_t *leOffset) {
  if (!win || !leId || !leOffset || peerCft < 0 || peerCft >= team.nRanks)
    return fail(invalid_argument, "fake: ncclGetCftDeviceLeInfo");
  *leId = 100 + (uint32_t)peerCft;
  *leOffset = offset;
  return ok;
}
API int ncclGetPeerDeviceLeInfo(void *win, size_t offset, int peerWorld, uint32_t *leId, size_t *leOffset) {
  if (!win || !leId || !leOffset || peerWorld < 0) return fail(invalid_argument, "fake: ncclGetPeerDeviceLeInfo");
  *leId = 200 + (uint32_t)peerWorld;
  *leOffset = offset;
  return ok;
}
API int ncclPutSignal(const void *localbuff, size_t count, int datatype, int peer, void *peerWin, size_t peerWinOffset,
                      int sigIdx, int ctx, unsigned flags, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, datatype) || !peerWin || peer < 0 || peer >= c->nranks) return invalid_argument;
  log_call("put_signal %p %zu %d %d %p %zu %d %d %u\n", localbuff, count, datatype, peer, peerWin, peerWinOffset,
           sigIdx, ctx, flags);
  if (c->nranks == 1) memcpy(window_base(peerWin) + peerWinOffset, localbuff, count * type_size[datatype]);
  return ok;
}
API int ncclSignal(int peer, int sigIdx, int ctx, unsigned flags, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, 0) || peer < 0 || peer >= c->nranks) return invalid_argument;
  log_call("signal %d %d %d %u\n", peer, sigIdx, ctx, flags);
  return ok;
}
typedef struct fake_wait_desc { int opCnt, peer, sigIdx, ctx; } fake_wait_desc;  /* ncclWaitSignalDesc_t */
API int ncclWaitSignal(int nDesc, const fake_wait_desc *descs, fake_comm *c, void *stream) {
  (void)stream;
  if (check(c, 0) || nDesc < 0 || (nDesc && !descs)) return invalid_argument;
  log_call("wait_signal %d\n", nDesc);
  for (int i = 0; i < nDesc; i++)
    log_call("desc %d %d %d %d\n", descs[i].opCnt, descs[i].peer, descs[i].sigIdx, descs[i].ctx);
  return ok;
}
#endif
