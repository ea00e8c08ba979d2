/* Does a real libnccl accept versioned structs stamped by another NCCL version as it
 * accepts its own? ncclCommInitRankConfig gets an ncclConfig_t in the 2.28.9 layout
 * (version 22809) and in the newest layout (version NB_NCCL_VERSION_CODE, with fields
 * 2.28.9 lacks set to values no library accepts); ncclGroupSimulateEnd gets
 * ncclSimInfo_t stamps of 2.28.9, the newest release and a larger, future size. Bad-magic calls
 * show whether the library validated the struct at all before failing elsewhere.
 *
 * Every call goes through the ncclbind runtime (NCCLBIND_NCCL_PATH picks the library)
 * and is printed with its result and ncclGetLastError(NULL). The test fails if the
 * binding's stamps are not what it compiled (size = sizeof the layout, one magic, the
 * newest layout stamped NB_NCCL_VERSION_CODE), or if a stamp other than the library's own
 * is treated differently from the library's own. Without a GPU every comm init fails on
 * CUDA before NCCL reads the config, so the config comparison is not made and the test
 * prints "SKIP <what>: <why>" for it (the C tests' skip line, which tools/test.sh counts in
 * a passing target's log); the simInfo comparison runs anywhere, except on a release older
 * than ncclGroupSimulateEnd (NCCL 2.22), where it is a SKIP line too. Built with -DSTAMP_TEST_WITH_CUDART
 * on a machine with GPUs, it makes one communicator over all of them (or over the first
 * STAMP_TEST_GPUS), and the simulated groups hold an all-reduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ncclbind/nccl.h>
#include <ncclbind/runtime.h>

#ifdef STAMP_TEST_WITH_CUDART
#include <cuda_runtime_api.h>
#endif

enum { MAX_GPUS = 8, COUNT = 1 << 20 };

static int ngpus = 1;
static nb_ncclComm_t comms[MAX_GPUS];
static void *bufs[MAX_GPUS];

static void set_device(int i) {
#ifdef STAMP_TEST_WITH_CUDART
  cudaSetDevice(i);
#else
  (void)i;
#endif
}

static const char *result_name(int r) {
  static const char *names[] = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
                                "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
                                "ncclRemoteError", "ncclInProgress", "ncclTimeout"};
  return r >= 0 && r <= 8 ? names[r] : "(not an ncclResult_t)";
}

static int report(const char *what, nb_ncclResult_t r) {
  const char *last = nb_ncclGetLastError(NULL);
  printf("%-64s -> %d %s | last error: %s\n", what, (int)r, result_name((int)r), last ? last : "(null)");
  fflush(stdout);
  return (int)r;
}

/* One communicator over every GPU (rank i on GPU i) with `config`; kept in comms[] if
 * `keep`, else destroyed again. */
static int init_with(const char *what, void *config, int keep) {
  nb_ncclUniqueId id;
  memset(&id, 0, sizeof id);
  report("  ncclGetUniqueId", nb_ncclGetUniqueId(&id));
  nb_ncclComm_t made[MAX_GPUS] = {0};
  int r;
  if (ngpus == 1) {
    r = report(what, nb_ncclCommInitRankConfig(&made[0], 1, id, 0, (nb_ncclConfig_t *)config));
  } else {
    nb_ncclGroupStart();
    int first = 0;
    for (int i = 0; i < ngpus; i++) {
      set_device(i);
      int ri = (int)nb_ncclCommInitRankConfig(&made[i], ngpus, id, i, (nb_ncclConfig_t *)config);
      if (ri != 0 && first == 0) first = ri;
    }
    int re = (int)nb_ncclGroupEnd();
    char line[128];
    snprintf(line, sizeof line, "%s, %d ranks", what, ngpus);
    r = report(line, (nb_ncclResult_t)(first ? first : re));
  }
  for (int i = 0; i < ngpus; i++) {
    if (made[i] == NULL) continue;
    if (r == 0 && keep) comms[i] = made[i];
    else nb_ncclCommDestroy(made[i]);
  }
  return r;
}

/* ncclbind's error when the loaded library lacks ncclGroupSimulateEnd ("" while it has it). */
static char sim_missing[512];

static int simulate(const char *what, nb_ncclSimInfo_t *sim) {
  report("  ncclGroupStart", nb_ncclGroupStart());
  for (int i = 0; i < ngpus; i++) {
    if (comms[i] == NULL || bufs[i] == NULL) continue;
    set_device(i);
    report("  ncclAllReduce (in the group)",
           nb_ncclAllReduce(bufs[i], bufs[i], COUNT, nb_ncclFloat32, nb_ncclSum, comms[i], NULL));
  }
  int r = report(what, nb_ncclGroupSimulateEnd(sim));
  if (r == NCCLBIND_ERROR_SYMBOL_NOT_FOUND && !sim_missing[0])
    snprintf(sim_missing, sizeof sim_missing, "%s", ncclbind_last_error());
  printf("%-64s    estimatedTime: %g\n", "", (double)sim->estimatedTime);
  if (r != 0) report("  ncclGroupEnd (in case the failed end left the group open)", nb_ncclGroupEnd());
  return r;
}

typedef struct {
  nb_ncclSimInfo_t today;
  double futureField;
  int futureFlags;
} future_sim_info;

int main(void) {
  int version = 0;
  if (nb_ncclGetVersion(&version) != 0) {
    printf("ncclGetVersion failed: %s\n", ncclbind_last_error());
    return 2;
  }
#ifdef STAMP_TEST_WITH_CUDART
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 1) ngpus = 1;
  if (ngpus > MAX_GPUS) ngpus = MAX_GPUS;
  const char *limit = getenv("STAMP_TEST_GPUS");  /* use fewer GPUs than the machine has */
  if (limit && atoi(limit) >= 1 && atoi(limit) < ngpus) ngpus = atoi(limit);
#endif
  printf("library version code %d, %d GPU(s)\n", version, ngpus);
  int failures = 0;

  nb_ncclConfig_t__v22809 config_22809;
  nb_init_NCCL_CONFIG_INITIALIZER__v22809(&config_22809);
  nb_ncclConfig_t config_23203;
  nb_init_NCCL_CONFIG_INITIALIZER(&config_23203);
  /* Fields 2.28.9 does not have, set to values no library accepts: an older library must not read them. */
  config_23203.numRmaCtx = -7;
  config_23203.hostCftMode = 12345;
  nb_ncclConfig_t bad_magic;
  nb_init_NCCL_CONFIG_INITIALIZER(&bad_magic);
  bad_magic.magic = 0x12345678u;

  /* The bytes the binding writes, before any library sees them. */
  if (config_22809.size != sizeof config_22809 || config_23203.size != sizeof config_23203 ||
      config_22809.size == config_23203.size || config_22809.magic != config_23203.magic ||
      config_22809.version != 22809 || config_23203.version != NB_NCCL_VERSION_CODE) {
    printf("FAIL: config stamps size %u/%zu magic %#x/%#x version %u/%u; want sizeof, one magic, 22809/%d\n",
           (unsigned)config_22809.size, sizeof config_22809, (unsigned)config_22809.magic,
           (unsigned)config_23203.magic, (unsigned)config_22809.version, (unsigned)config_23203.version,
           NB_NCCL_VERSION_CODE);
    failures++;
  }

  int r_old = init_with("ncclCommInitRankConfig, config of the 2.28.9 layout", &config_22809, 0);
  int r_new = init_with("ncclCommInitRankConfig, config of the newest layout", &config_23203, 1);
  int r_bad = init_with("ncclCommInitRankConfig, config with a bad magic", &bad_magic, 0);
  int r_own = version < NB_NCCL_VERSION_CODE ? r_old : r_new;
  if (r_own != 0) {
    /* Both inits failed before NCCL read the config (no GPU): comparing them proves nothing. */
    printf("SKIP config stamps of the 2.28.9 and newest layouts compared on libnccl %d: its own stamp's "
           "ncclCommInitRankConfig failed too (%s), before NCCL read the config; the GPU build "
           "(-DSTAMP_TEST_WITH_CUDART) compares them\n",
           version, result_name(r_own));
  } else if (version < NB_NCCL_VERSION_CODE && r_new != r_old) {
    printf("FAIL: this library (%d) treats the newest stamp unlike its own\n", version);
    failures++;
  }
  printf("the config was %s (bad magic -> %s)\n", r_bad == 4 ? "validated" : "not validated",
         result_name(r_bad));
  if (r_new == 0 && ngpus == 1) {
    /* A field both layouts share, read from the newer stamp: blocking = 0 makes init non-blocking. */
    nb_ncclConfig_t nonblocking = config_23203;
    nonblocking.blocking = 0;
    nb_ncclUniqueId id;
    nb_ncclGetUniqueId(&id);
    nb_ncclComm_t comm = NULL;
    int r = report("ncclCommInitRankConfig, newest layout, blocking = 0",
                   nb_ncclCommInitRankConfig(&comm, 1, id, 0, &nonblocking));
    nb_ncclResult_t state = nb_ncclInProgress;
    while (comm != NULL && (int)state == 7) nb_ncclCommGetAsyncError(comm, &state);
    printf("%-64s    returned %s, then ncclCommGetAsyncError reached %s\n", "", result_name(r),
           result_name((int)state));
    if (comm) nb_ncclCommDestroy(comm);
  }

#ifdef STAMP_TEST_WITH_CUDART
  for (int i = 0; i < ngpus; i++) {
    set_device(i);
    if (comms[i] != NULL && cudaMalloc(&bufs[i], COUNT * sizeof(float)) != cudaSuccess) bufs[i] = NULL;
  }
#endif
  nb_ncclSimInfo_t sim_22809, sim_23203, sim_bad;
  nb_init_NCCL_SIM_INFO_INITIALIZER(&sim_22809);
  sim_22809.version = 22809;
  nb_init_NCCL_SIM_INFO_INITIALIZER(&sim_23203);
  nb_init_NCCL_SIM_INFO_INITIALIZER(&sim_bad);
  sim_bad.magic = 0x12345678u;
  future_sim_info future;
  memset(&future, 0, sizeof future);
  nb_init_NCCL_SIM_INFO_INITIALIZER(&future.today);
  future.today.size = sizeof future;
  future.today.version = 29999;
  future.futureField = 4.5;
  future.futureFlags = 77;
  if (sim_23203.size != sizeof sim_23203 || sim_23203.version != NB_NCCL_VERSION_CODE ||
      sim_22809.magic != sim_23203.magic) {
    printf("FAIL: simInfo stamp size %u/%zu version %u magic %#x; want sizeof, %d, one magic\n",
           (unsigned)sim_23203.size, sizeof sim_23203, (unsigned)sim_23203.version,
           (unsigned)sim_23203.magic, NB_NCCL_VERSION_CODE);
    failures++;
  }
  char label[128];
  snprintf(label, sizeof label, "ncclGroupSimulateEnd, simInfo size %u version %u", (unsigned)sim_22809.size,
           (unsigned)sim_22809.version);
  int s_old = simulate(label, &sim_22809);
  snprintf(label, sizeof label, "ncclGroupSimulateEnd, simInfo size %u version %u", (unsigned)sim_23203.size,
           (unsigned)sim_23203.version);
  int s_new = simulate(label, &sim_23203);
  snprintf(label, sizeof label, "ncclGroupSimulateEnd, simInfo size %u version %u", (unsigned)future.today.size,
           (unsigned)future.today.version);
  int s_future = simulate(label, &future.today);
  printf("%-64s    fields past %zu bytes after the call: %g, %d (were 4.5, 77)\n", "", sizeof future.today,
         future.futureField, future.futureFlags);
  int s_bad = simulate("ncclGroupSimulateEnd, simInfo with a bad magic", &sim_bad);
  int own = version < NB_NCCL_VERSION_CODE ? s_old : s_new;
  if (sim_missing[0] && (s_old != NCCLBIND_ERROR_SYMBOL_NOT_FOUND || s_new != s_old || s_future != s_old ||
                         s_bad != s_old)) {
    printf("FAIL: ncclGroupSimulateEnd was missing for some calls only (%d %d %d %d): %s\n", s_old, s_new,
           s_future, s_bad, sim_missing);
    failures++;
  } else if (sim_missing[0]) {
    /* Every call stopped in ncclbind before any library saw a stamp: nothing was compared. */
    printf("SKIP simInfo stamps compared on libnccl %d: it has no ncclGroupSimulateEnd (%s)\n", version,
           sim_missing);
  } else if (s_old != own || s_new != own || s_future != own || future.futureField != 4.5 ||
             future.futureFlags != 77) {
    printf("FAIL: this library (%d) treats a simInfo stamp unlike its own\n", version);
    failures++;
  }
  if (!sim_missing[0])
    printf("the simInfo was %s (bad magic -> %s)\n", s_bad == 4 ? "validated" : "not validated",
           result_name(s_bad));
  for (int i = 0; i < ngpus; i++) {
#ifdef STAMP_TEST_WITH_CUDART
    if (bufs[i]) cudaFree(bufs[i]);
#endif
    if (comms[i]) nb_ncclCommDestroy(comms[i]);
  }
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
