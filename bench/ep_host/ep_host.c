/* The host cost of one NCCL EP dispatch and combine from C, over the stand-in libnccl_ep
 * (tests/python/fake_nccl_ep.c) and libnccl (fake_nccl.c), which NCCLBIND_NCCL_EP_PATH and
 * NCCLBIND_NCCL_PATH name (bench/ep_host/run.sh builds them):
 *
 *   ep_host c N        the generated nb_ncclEpDispatch / nb_ncclEpCombine (bindings/c, runtime)
 *   ep_host direct N   the stand-in's ncclEpDispatch / ncclEpCombine through dlsym: no binding,
 *                      what every layer's figure includes
 *
 * The calls are tests/multigpu/ep/c/ep_ranks.c's for LL expert-major (records filled per call) at
 * the decode size of its bench, rank 0 of 2. A warm-up of N / 10 pairs, then N dispatches timed
 * as one and N combines timed as one (CLOCK_MONOTONIC); prints one line for rounds.py:
 *   EP_HOST {"layer": "c", "n": N, "dispatch_ns": 123.4, "combine_ns": 98.7} */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ncclbind/nccl.h>
#include <ncclbind/nccl_ep.h>

/* tests/multigpu/ep/python/ep_bench.py's decode size; 2 ranks as on 2x H200: the stand-in moves
 * data for a one-rank group (14 MiB per dispatch here), for two it only checks the arguments. */
enum { TOKENS = 128, HIDDEN = 7168, TOPK = 8, EXPERTS = 256, NRANKS = 2, LOCAL = EXPERTS / NRANKS };

#define OK(call)                                                                                           \
  do {                                                                                                     \
    nb_ncclResult_t r_ = (call);                                                                           \
    if (r_ != nb_ncclSuccess) {                                                                            \
      fprintf(stderr, "ep_host: %s: %s: %s\n", #call, ncclbind_result_name(r_),                            \
              ncclbind_last_error_code() == (int)r_ ? ncclbind_last_error() : ncclbind_nccl_last_error()); \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)

typedef nb_ncclResult_t (*dispatch_fn)(nb_ncclEpHandle_t, const nb_ncclEpDispatchInputs_t *,
                                       const nb_ncclEpDispatchOutputs_t *, const nb_ncclEpLayoutInfo_t *,
                                       const nb_ncclEpDispatchConfig_t *, void *);
typedef nb_ncclResult_t (*combine_fn)(nb_ncclEpHandle_t, const nb_ncclEpCombineInputs_t *,
                                      const nb_ncclEpCombineOutputs_t *, const nb_ncclEpCombineConfig_t *, void *);

typedef struct tensor {
  nb_ncclEpTensor_t desc;
  size_t sizes[3];
} tensor;

/* Host memory stands in for device memory; the stand-in never touches it at two ranks. */
static void tensor_make(tensor *t, nb_ncclDataType_t type, size_t elem, unsigned ndim, size_t d0, size_t d1,
                        size_t d2) {
  nb_init_NCCL_EP_TENSOR_INIT(&t->desc);
  t->sizes[0] = d0, t->sizes[1] = d1, t->sizes[2] = d2;
  t->desc.ndim = ndim;
  t->desc.datatype = type;
  t->desc.sizes = t->sizes;
  t->desc.data = calloc(d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1), elem);
}

typedef struct bench {
  nb_ncclEpHandle_t handle;
  tensor x, recv, counts, weights, combined;
  void *stream;
} bench;

/* ep_ranks.c's try_dispatch and combine for LL, with the function to call as a parameter. */
static inline nb_ncclResult_t dispatch(bench *b, dispatch_fn fn) {
  nb_ncclEpDispatchInputs_t in;
  nb_ncclEpDispatchOutputs_t out;
  nb_ncclEpLayoutInfo_t info;
  nb_init_NCCL_EP_DISPATCH_INPUTS_INIT(&in);
  nb_init_NCCL_EP_DISPATCH_OUTPUTS_INIT(&out);
  nb_init_NCCL_EP_LAYOUT_INFO_INIT(&info);
  in.tokens = &b->x.desc;
  out.tokens = &b->recv.desc;
  info.expert_counters = &b->counts.desc;
  return fn(b->handle, &in, &out, &info, NULL, b->stream);
}

static inline nb_ncclResult_t combine(bench *b, combine_fn fn) {
  nb_ncclEpCombineInputs_t in;
  nb_ncclEpCombineOutputs_t out;
  nb_init_NCCL_EP_COMBINE_INPUTS_INIT(&in);
  nb_init_NCCL_EP_COMBINE_OUTPUTS_INIT(&out);
  in.tokens = &b->recv.desc;
  out.tokens = &b->combined.desc;
  out.topk_weights = &b->weights.desc;
  return fn(b->handle, &in, &out, NULL, b->stream);
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *stand_in_symbol(void *library, const char *name) {
  void *symbol = dlsym(library, name);
  if (!symbol) {
    fprintf(stderr, "ep_host: the stand-in libnccl_ep lacks %s (NCCLBIND_NCCL_EP_PATH)\n", name);
    exit(2);
  }
  return symbol;
}

int main(int argc, char **argv) {
  const char *layer = argc > 1 ? argv[1] : "";
  long n = argc > 2 ? atol(argv[2]) : 0;
  int direct = strcmp(layer, "direct") == 0;
  const char *path = getenv("NCCLBIND_NCCL_EP_PATH");
  if ((!direct && strcmp(layer, "c") != 0) || n < 1 || !path) {
    fprintf(stderr, "usage: NCCLBIND_NCCL_EP_PATH=<stand-in> ep_host c|direct N\n");
    return 2;
  }
  /* The runtime's copy (same path, same object): two ranks, and no call log. */
  void *library = dlopen(path, RTLD_NOW);
  if (!library) {
    fprintf(stderr, "ep_host: %s\n", dlerror());
    return 2;
  }
  ((void (*)(int))stand_in_symbol(library, "fakeEpSetNranks"))(NRANKS);
  ((void (*)(int))stand_in_symbol(library, "fakeEpSetLogging"))(0);

  nb_ncclUniqueId id;
  nb_ncclComm_t comm;
  OK(nb_ncclGetUniqueId(&id));
  OK(nb_ncclCommInitRank(&comm, NRANKS, id, 0));
  nb_ncclEpGroupConfig_t config;
  nb_init_NCCL_EP_GROUP_CONFIG_INIT(&config);
  config.algorithm = nb_NCCL_EP_ALGO_LOW_LATENCY;
  config.num_experts = EXPERTS;
  config.max_dispatch_tokens_per_rank = TOKENS;
  config.max_token_bytes = HIDDEN * 2;
  nb_ncclEpGroup_t group;
  OK(nb_ncclEpCreateGroup(&group, comm, &config));

  bench b = {.stream = NULL};
  tensor topk;
  tensor_make(&topk, nb_ncclInt64, 8, 2, TOKENS, TOPK, 0);
  for (size_t i = 0; i < TOKENS * TOPK; i++) ((long long *)topk.desc.data)[i] = (long long)((i * 37) % EXPERTS);
  tensor_make(&b.x, nb_ncclBfloat16, 2, 2, TOKENS, HIDDEN, 0);
  tensor_make(&b.recv, nb_ncclBfloat16, 2, 3, LOCAL, NRANKS * TOKENS, HIDDEN);
  tensor_make(&b.counts, nb_ncclInt32, 4, 1, LOCAL, 0, 0);
  tensor_make(&b.weights, nb_ncclFloat32, 4, 2, TOKENS, TOPK, 0);
  tensor_make(&b.combined, nb_ncclBfloat16, 2, 2, TOKENS, HIDDEN, 0);
  OK(nb_ncclEpCreateHandle(&b.handle, group, nb_NCCL_EP_LAYOUT_EXPERT_MAJOR, &topk.desc, NULL, NULL, b.stream));

  dispatch_fn stand_in_dispatch = (dispatch_fn)stand_in_symbol(library, "ncclEpDispatch");
  combine_fn stand_in_combine = (combine_fn)stand_in_symbol(library, "ncclEpCombine");
  nb_ncclResult_t failed = nb_ncclSuccess;
  for (long i = 0; i < n / 10 + 1; i++) {
    failed |= direct ? dispatch(&b, stand_in_dispatch) : dispatch(&b, nb_ncclEpDispatch);
    failed |= direct ? combine(&b, stand_in_combine) : combine(&b, nb_ncclEpCombine);
  }
  double t0 = now_ns();
  if (direct)
    for (long i = 0; i < n; i++) failed |= dispatch(&b, stand_in_dispatch);
  else
    for (long i = 0; i < n; i++) failed |= dispatch(&b, nb_ncclEpDispatch);
  double t1 = now_ns();
  if (direct)
    for (long i = 0; i < n; i++) failed |= combine(&b, stand_in_combine);
  else
    for (long i = 0; i < n; i++) failed |= combine(&b, nb_ncclEpCombine);
  double t2 = now_ns();
  OK(failed);
  printf("EP_HOST {\"layer\": \"%s\", \"n\": %ld, \"dispatch_ns\": %.1f, \"combine_ns\": %.1f}\n", layer, n,
         (t1 - t0) / (double)n, (t2 - t1) / (double)n);
  OK(nb_ncclEpHandleDestroy(b.handle));
  OK(nb_ncclEpGroupDestroy(group));
  OK(nb_ncclCommDestroy(comm));
  return 0;
}
