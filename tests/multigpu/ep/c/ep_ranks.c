/* NCCL EP through the generated C binding (bindings/c/include/ncclbind/nccl_ep.h) and the
 * runtime, one process per GPU (this program forks them; the unique id goes through a file).
 * Low-latency (expert-major layout) and high-throughput (flat layout) dispatch then combine,
 * at several sizes, in bf16 and fp32, checked against a CPU reference: every received token
 * (its source rank, its index, every element) and the expert it was sent to, the counters,
 * HT's received expert ids and weights, and the combined weighted sums.
 * With --bench: the median and 10th-percentile time of each dispatch and combine (host wall
 * clock around the call and a stream synchronize), printed by rank 0 as
 *   BENCH {"layer": "c", "algo": "ll", "phase": "dispatch", "tokens": 128, ...}
 * Usage: ep_ranks [NRANKS (0: every GPU)] [--bench]
 * GPU only; built and run by tests/multigpu/ep/c/run.sh. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <ncclbind/nccl.h>
#include <ncclbind/nccl_ep.h>

static int g_rank, g_nranks, g_checks, g_failures;

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "rank %d: ep_ranks.c:%d: %s failed: %s\n", g_rank, __LINE__, #call,          \
              cudaGetErrorString(e_));                                                             \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

/* A failed NCCL / NCCL EP call ends the rank: its peers would wait in the next collective. */
#define NB_OK(call)                                                                                \
  do {                                                                                             \
    nb_ncclResult_t r_ = (call);                                                                   \
    if (r_ != nb_ncclSuccess) {                                                                    \
      fprintf(stderr, "rank %d: FAIL ep_ranks.c:%d: %s: %s: %s\n", g_rank, __LINE__, #call,        \
              ncclbind_result_name(r_),                                                            \
              ncclbind_last_error_code() == (int)r_ ? ncclbind_last_error() : ncclbind_nccl_last_error()); \
      exit(3);                                                                                     \
    }                                                                                              \
  } while (0)

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  g_checks++;
  if (ok) return;
  if (++g_failures <= 20) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "rank %d: FAIL ", g_rank);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
  }
}

/* ---- Element types ------------------------------------------------------ */

typedef struct dtype {
  nb_ncclDataType_t id;
  const char *name;
  size_t size;
} dtype;
static const dtype BF16 = {nb_ncclBfloat16, "bf16", 2}, FP32 = {nb_ncclFloat32, "fp32", 4};

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void store(const dtype *t, void *base, size_t i, double v) {
  if (t->id == nb_ncclBfloat16) ((uint16_t *)base)[i] = to_bf16((float)v);
  else ((float *)base)[i] = (float)v;
}
static double load(const dtype *t, const void *base, size_t i) {
  return t->id == nb_ncclBfloat16 ? from_bf16(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

/* ---- The problem every rank can recompute -------------------------------- */

typedef struct shape {
  int tokens, hidden, topk, experts;
} shape;

/* Token t of rank src: element 0 names the rank, 1 the token, the rest a pattern; all small
 * integers, exact in bf16. */
static double token_value(int src, int t, int h) {
  if (h == 0) return src + 1;
  if (h == 1) return t + 1;
  return (double)((src * 131 + t * 17 + h * 7) % 29) - 14;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull, x ^= x >> 33;
  return x;
}

/* topk distinct experts of token t of rank src, seeded per case. */
static void routing(const shape *s, int seed, int src, int t, int64_t *out) {
  for (int k = 0; k < s->topk; k++) {
    uint64_t draw = mix((uint64_t)seed * 1000003u + (uint64_t)src * 7919u + (uint64_t)t * 131u + (uint64_t)k);
    int64_t e = (int64_t)(draw % (uint64_t)s->experts);
    for (int again = 1; again;) { /* linear probe to a not-yet-chosen expert */
      again = 0;
      for (int j = 0; j < k; j++)
        if (out[j] == e) e = (e + 1) % s->experts, again = 1;
    }
    out[k] = e;
  }
}

static double weight(const shape *s, int k) { return (double)(k + 1) / (s->topk * (s->topk + 1) / 2); }

/* What the "expert" e does to a row: multiplies it by a small integer (exact in bf16). */
static double expert_factor(int64_t e) { return (double)(e % 7 + 1); }

/* ---- Device tensors -------------------------------------------------------- */

typedef struct tensor {
  nb_ncclEpTensor_t desc;
  size_t sizes[3];
  size_t bytes;
} tensor;

static void tensor_alloc(tensor *t, nb_ncclDataType_t type, size_t elem, unsigned ndim, size_t d0, size_t d1,
                         size_t d2) {
  nb_init_NCCL_EP_TENSOR_INIT(&t->desc);
  t->sizes[0] = d0, t->sizes[1] = d1, t->sizes[2] = d2;
  t->bytes = elem * d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
  t->desc.ndim = ndim;
  t->desc.datatype = type;
  t->desc.sizes = t->sizes;
  CUDA_OK(cudaMalloc(&t->desc.data, t->bytes));
  CUDA_OK(cudaMemset(t->desc.data, 0, t->bytes));
}
static void tensor_free(tensor *t) { CUDA_OK(cudaFree(t->desc.data)); }

/* ---- One case --------------------------------------------------------------- */

typedef enum { LL, HT } algo;

typedef struct ep_case {
  nb_ncclComm_t comm;
  cudaStream_t stream;
  algo algorithm;
  shape s;
  const dtype *t;
  int seed;
  int local_experts, recv_slots; /* HT: slots per rank */
  nb_ncclEpGroup_t group;
  nb_ncclEpHandle_t handle;
  tensor x, topk, weights, recv, recv_weights, recv_topk, counts, total, combined;
  int64_t *all_topk; /* [nranks][tokens][topk] */
} ep_case;

static int64_t *topk_of(ep_case *c, int src, int t) {
  return c->all_topk + ((size_t)src * c->s.tokens + (size_t)t) * c->s.topk;
}

/* HT's receive budget (ncclEpGroupConfig_t::max_recv_tokens_per_rank), NCCLBIND_EP_HT_RECV:
 *   eager (the default, and nccl.ep's own default: 0): NCCL_EP_AUTO; the library derives its
 *          bound, nRanks * max_dispatch_tokens_per_rank * max(num_topk, 1) by its own message, and
 *          the outputs hold the routing's recv_total_counter rows, read after ncclEpCreateHandle
 *          (nccl_ep.h, "Query-then-allocate").
 *   rank:  nRanks * tokens, explicit: every rank's every token once (a flat slot is one token).
 *   topk:  nRanks * tokens * top_k, explicit: the library's eager formula as a fixed bound.
 * On 2x H200 (0.2.0) "rank" tripped ht_ep.cuh:1528 (output_buffer_index < max_recv_tokens_per_rank);
 * run.sh tries each in its own process when HT fails, so one run tells them apart. */
static const char *label(ep_case *c);

/* Waits for the case's stream after one NCCL EP call: a device fault (sticky, reported by the next
 * CUDA call) is then named with the call that launched it and the case, not a later copy. */
static void settle(ep_case *c, const char *after) {
  cudaError_t e = cudaStreamSynchronize(c->stream);
  if (e != cudaSuccess) {
    fprintf(stderr, "rank %d: FAIL %s: device fault after %s: %s\n", g_rank, label(c), after,
            cudaGetErrorString(e));
    exit(2);
  }
}

static const char *ht_recv_mode(void) {
  const char *m = getenv("NCCLBIND_EP_HT_RECV");
  return m && *m ? m : "eager";
}

static void setup(ep_case *c) {
  const shape *s = &c->s;
  c->local_experts = s->experts / g_nranks;
  c->recv_slots = g_nranks * s->tokens;
  unsigned ht_budget = NB_NCCL_EP_AUTO;
  if (c->algorithm == HT && strcmp(ht_recv_mode(), "eager") != 0) {
    if (strcmp(ht_recv_mode(), "topk") == 0) c->recv_slots *= s->topk;
    else if (strcmp(ht_recv_mode(), "rank") != 0) {
      fprintf(stderr, "rank %d: NCCLBIND_EP_HT_RECV must be eager, rank or topk, not %s\n", g_rank, ht_recv_mode());
      exit(2);
    }
    ht_budget = (unsigned)c->recv_slots;
  }
  nb_ncclEpGroupConfig_t config;
  nb_init_NCCL_EP_GROUP_CONFIG_INIT(&config);
  config.algorithm = c->algorithm == LL ? nb_NCCL_EP_ALGO_LOW_LATENCY : nb_NCCL_EP_ALGO_HIGH_THROUGHPUT;
  config.num_experts = (unsigned)s->experts;
  config.max_dispatch_tokens_per_rank = (unsigned)s->tokens;
  config.max_recv_tokens_per_rank = ht_budget;
  config.max_token_bytes = (unsigned)((s->hidden * c->t->size + 15) / 16 * 16);
  NB_OK(nb_ncclEpCreateGroup(&c->group, c->comm, &config));

  c->all_topk = malloc(sizeof(int64_t) * (size_t)g_nranks * s->tokens * s->topk);
  for (int src = 0; src < g_nranks; src++)
    for (int t = 0; t < s->tokens; t++) routing(s, c->seed, src, t, topk_of(c, src, t));

  size_t row = (size_t)s->hidden * c->t->size;
  char *host = malloc(row * s->tokens);
  for (int t = 0; t < s->tokens; t++)
    for (int h = 0; h < s->hidden; h++) store(c->t, host, (size_t)t * s->hidden + h, token_value(g_rank, t, h));
  tensor_alloc(&c->x, c->t->id, c->t->size, 2, s->tokens, s->hidden, 0);
  CUDA_OK(cudaMemcpy(c->x.desc.data, host, c->x.bytes, cudaMemcpyHostToDevice));
  free(host);

  tensor_alloc(&c->topk, nb_ncclInt64, 8, 2, s->tokens, s->topk, 0);
  CUDA_OK(cudaMemcpy(c->topk.desc.data, topk_of(c, g_rank, 0), c->topk.bytes, cudaMemcpyHostToDevice));
  float *w = malloc(sizeof(float) * s->tokens * s->topk);
  for (int t = 0; t < s->tokens; t++)
    for (int k = 0; k < s->topk; k++) w[t * s->topk + k] = (float)weight(s, k);
  tensor_alloc(&c->weights, nb_ncclFloat32, 4, 2, s->tokens, s->topk, 0);
  CUDA_OK(cudaMemcpy(c->weights.desc.data, w, c->weights.bytes, cudaMemcpyHostToDevice));
  free(w);
  tensor_alloc(&c->combined, c->t->id, c->t->size, 2, s->tokens, s->hidden, 0);
  tensor_alloc(&c->counts, nb_ncclInt32, 4, 1, c->local_experts, 0, 0);

  if (c->algorithm == LL) {
    tensor_alloc(&c->recv, c->t->id, c->t->size, 3, c->local_experts, c->recv_slots, s->hidden);
    NB_OK(nb_ncclEpCreateHandle(&c->handle, c->group, nb_NCCL_EP_LAYOUT_EXPERT_MAJOR, &c->topk.desc, NULL, NULL,
                                c->stream));
  } else {
    tensor_alloc(&c->total, nb_ncclInt32, 4, 1, 1, 0, 0);
    nb_ncclEpLayoutInfo_t info;
    nb_init_NCCL_EP_LAYOUT_INFO_INIT(&info);
    info.expert_counters = &c->counts.desc;
    info.recv_total_counter = &c->total.desc;
    info.recv_topk_idx_kind = nb_NCCL_EP_EXPERT_ID_LOCAL;
    NB_OK(nb_ncclEpCreateHandle(&c->handle, c->group, nb_NCCL_EP_LAYOUT_FLAT, &c->topk.desc, &info, NULL,
                                c->stream));
    settle(c, "ncclEpCreateHandle (HT flat)");
    if (ht_budget == NB_NCCL_EP_AUTO) { /* query-then-allocate: the outputs hold what this routing sends here */
      int32_t total = 0;
      CUDA_OK(cudaMemcpy(&total, c->total.desc.data, 4, cudaMemcpyDeviceToHost));
      check(total >= 0 && total <= c->recv_slots, "%s: recv_total_counter %d, not in [0, %d]", label(c), total,
            c->recv_slots);
      if (total > 0 && total <= c->recv_slots) c->recv_slots = total;
    }
    tensor_alloc(&c->recv, c->t->id, c->t->size, 2, c->recv_slots, s->hidden, 0);
    tensor_alloc(&c->recv_weights, nb_ncclFloat32, 4, 2, c->recv_slots, s->topk, 0);
    tensor_alloc(&c->recv_topk, nb_ncclInt64, 8, 2, c->recv_slots, s->topk, 0);
  }
}

static void teardown(ep_case *c) {
  NB_OK(nb_ncclEpHandleDestroy(c->handle));
  NB_OK(nb_ncclEpGroupDestroy(c->group));
  tensor *all[] = {&c->x, &c->topk, &c->weights, &c->recv, &c->counts, &c->combined};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) tensor_free(all[i]);
  if (c->algorithm == HT) tensor_free(&c->recv_weights), tensor_free(&c->recv_topk), tensor_free(&c->total);
  free(c->all_topk);
}

/* The dispatch's result: a case NCCL EP refuses is the caller's to judge. */
static nb_ncclResult_t try_dispatch(ep_case *c) {
  nb_ncclEpDispatchInputs_t in;
  nb_ncclEpDispatchOutputs_t out;
  nb_init_NCCL_EP_DISPATCH_INPUTS_INIT(&in);
  nb_init_NCCL_EP_DISPATCH_OUTPUTS_INIT(&out);
  in.tokens = &c->x.desc;
  out.tokens = &c->recv.desc;
  if (c->algorithm == LL) {
    nb_ncclEpLayoutInfo_t info;
    nb_init_NCCL_EP_LAYOUT_INFO_INIT(&info);
    info.expert_counters = &c->counts.desc;
    return nb_ncclEpDispatch(c->handle, &in, &out, &info, NULL, c->stream);
  } else {
    in.topk_weights = &c->weights.desc;
    out.topk_weights = &c->recv_weights.desc;
    out.topk_idx = &c->recv_topk.desc;
    return nb_ncclEpDispatch(c->handle, &in, &out, NULL, NULL, c->stream);
  }
}

static void dispatch(ep_case *c) { NB_OK(try_dispatch(c)); }

static void combine(ep_case *c) {
  nb_ncclEpCombineInputs_t in;
  nb_ncclEpCombineOutputs_t out;
  nb_init_NCCL_EP_COMBINE_INPUTS_INIT(&in);
  nb_init_NCCL_EP_COMBINE_OUTPUTS_INIT(&out);
  in.tokens = &c->recv.desc;
  out.tokens = &c->combined.desc;
  if (c->algorithm == LL) out.topk_weights = &c->weights.desc; /* applied on receive */
  NB_OK(nb_ncclEpCombine(c->handle, &in, &out, NULL, c->stream));
}

/* The (src, t) a received row names, or -1 if it names none; *row_ok: every element matches. */
static int identify(ep_case *c, const void *rows, size_t row, int *src, int *t) {
  const int hidden = c->s.hidden;
  *src = (int)load(c->t, rows, row * hidden) - 1;
  *t = (int)load(c->t, rows, row * hidden + 1) - 1;
  if (*src < 0 || *src >= g_nranks || *t < 0 || *t >= c->s.tokens) return -1;
  for (int h = 0; h < hidden; h++)
    if (load(c->t, rows, row * hidden + h) != token_value(*src, *t, h)) return -1;
  return 0;
}

static int routes_to(ep_case *c, int src, int t, int64_t e) {
  const int64_t *k = topk_of(c, src, t);
  for (int i = 0; i < c->s.topk; i++)
    if (k[i] == e) return i;
  return -1;
}

static const char *label(ep_case *c) {
  static char text[128];
  snprintf(text, sizeof text, "%s %s tokens=%d hidden=%d topk=%d experts=%d%s%s", c->algorithm == LL ? "LL" : "HT",
           c->t->name, c->s.tokens, c->s.hidden, c->s.topk, c->s.experts, c->algorithm == HT ? " recv=" : "",
           c->algorithm == HT ? ht_recv_mode() : "");
  return text;
}

/* LL expert-major: zone le holds the tokens routed to expert rank*L+le, counts[le] of them. */
static void check_ll_dispatch(ep_case *c, char *zone_rows, int32_t *counts) {
  const shape *s = &c->s;
  size_t zone_bytes = (size_t)c->recv_slots * s->hidden * c->t->size;
  CUDA_OK(cudaMemcpy(counts, c->counts.desc.data, c->counts.bytes, cudaMemcpyDeviceToHost));
  char *seen = calloc((size_t)g_nranks * s->tokens, 1);
  for (int le = 0; le < c->local_experts; le++) {
    int64_t e = (int64_t)g_rank * c->local_experts + le;
    int expected = 0;
    for (int src = 0; src < g_nranks; src++)
      for (int t = 0; t < s->tokens; t++) expected += routes_to(c, src, t, e) >= 0;
    check(counts[le] == expected, "%s: expert %lld received %d tokens, %d were sent to it", label(c), (long long)e,
          counts[le], expected);
    if (counts[le] != expected) {
      counts[le] = 0; /* nothing of this zone is trusted (or scaled) */
      continue;
    }
    char *rows = zone_rows + (size_t)le * zone_bytes;
    CUDA_OK(cudaMemcpy(rows, (char *)c->recv.desc.data + (size_t)le * zone_bytes,
                       (size_t)counts[le] * s->hidden * c->t->size, cudaMemcpyDeviceToHost));
    memset(seen, 0, (size_t)g_nranks * s->tokens);
    for (int i = 0; i < counts[le]; i++) {
      int src, t;
      int ok = identify(c, rows, (size_t)i, &src, &t) == 0;
      check(ok, "%s: expert %lld row %d is no token sent (or a corrupted one)", label(c), (long long)e, i);
      if (!ok) continue;
      check(routes_to(c, src, t, e) >= 0, "%s: expert %lld got token %d of rank %d, routed elsewhere", label(c),
            (long long)e, t, src);
      check(!seen[src * s->tokens + t], "%s: expert %lld got token %d of rank %d twice", label(c), (long long)e, t,
            src);
      seen[src * s->tokens + t] = 1;
    }
  }
  free(seen);
}

/* HT flat: row i < total is one token of some rank that routes to at least one expert here;
 * its received expert ids are local ids (or -1), its weights the sender's. */
static int check_ht_dispatch(ep_case *c, char *rows, int32_t *counts) {
  const shape *s = &c->s;
  int32_t total = 0;
  CUDA_OK(cudaMemcpy(&total, c->total.desc.data, 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(counts, c->counts.desc.data, c->counts.bytes, cudaMemcpyDeviceToHost));
  int expected = 0;
  int64_t first = (int64_t)g_rank * c->local_experts, last = first + c->local_experts;
  for (int src = 0; src < g_nranks; src++)
    for (int t = 0; t < s->tokens; t++) {
      int here = 0;
      for (int k = 0; k < s->topk; k++) here |= topk_of(c, src, t)[k] >= first && topk_of(c, src, t)[k] < last;
      expected += here;
    }
  check(total == expected, "%s: received %d tokens, %d route here", label(c), total, expected);
  for (int le = 0; le < c->local_experts; le++) {
    int want = 0;
    for (int src = 0; src < g_nranks; src++)
      for (int t = 0; t < s->tokens; t++) want += routes_to(c, src, t, first + le) >= 0;
    check(counts[le] == want, "%s: expert counter %d is %d, %d tokens route to it", label(c), le, counts[le], want);
  }
  if (total != expected) return -1;
  CUDA_OK(cudaMemcpy(rows, c->recv.desc.data, (size_t)total * s->hidden * c->t->size, cudaMemcpyDeviceToHost));
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)total * s->topk);
  float *w = malloc(sizeof(float) * (size_t)total * s->topk);
  CUDA_OK(cudaMemcpy(ids, c->recv_topk.desc.data, sizeof(int64_t) * (size_t)total * s->topk, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(w, c->recv_weights.desc.data, sizeof(float) * (size_t)total * s->topk, cudaMemcpyDeviceToHost));
  char *seen = calloc((size_t)g_nranks * s->tokens, 1);
  for (int i = 0; i < total; i++) {
    int src, t;
    int ok = identify(c, rows, (size_t)i, &src, &t) == 0;
    check(ok, "%s: row %d is no token sent (or a corrupted one)", label(c), i);
    if (!ok) continue;
    check(!seen[src * s->tokens + t], "%s: token %d of rank %d received twice", label(c), t, src);
    seen[src * s->tokens + t] = 1;
    /* The row's received (local expert id, weight) pairs are those of the sender's top-k that route
     * here, in an order of the library's (0.2.0 lists them by ascending id, then -1 padding): each
     * sent pair must be received once, and every other entry must be -1. */
    int here = 0;
    for (int k = 0; k < s->topk; k++) {
      int64_t e = topk_of(c, src, t)[k];
      if (e < first || e >= last) continue;
      here++;
      int found = 0;
      for (int j = 0; j < s->topk && !found; j++)
        found = ids[i * s->topk + j] == e - first && w[i * s->topk + j] == (float)weight(s, k);
      check(found, "%s: token %d of rank %d: expert %lld (local %lld) with weight %g not among its received pairs",
            label(c), t, src, (long long)e, (long long)(e - first), weight(s, k));
    }
    int padding = 0;
    for (int j = 0; j < s->topk; j++) padding += ids[i * s->topk + j] == -1;
    check(padding == s->topk - here, "%s: token %d of rank %d: %d received ids are -1, expected %d", label(c), t, src,
          padding, s->topk - here);
  }
  free(seen), free(ids), free(w);
  return total;
}

/* out[t] = sum_k w_k * factor(e_k) * x[t]: the reference of both combines. */
static void check_combined(ep_case *c) {
  const shape *s = &c->s;
  size_t n = (size_t)s->tokens * s->hidden;
  char *out = malloc(n * c->t->size);
  CUDA_OK(cudaMemcpy(out, c->combined.desc.data, n * c->t->size, cudaMemcpyDeviceToHost));
  int bad = 0;
  double worst = 0;
  for (int t = 0; t < s->tokens; t++) {
    double scale = 0;
    for (int k = 0; k < s->topk; k++) scale += weight(s, k) * expert_factor(topk_of(c, g_rank, t)[k]);
    for (int h = 0; h < s->hidden; h++) {
      double want = scale * token_value(g_rank, t, h), got = load(c->t, out, (size_t)t * s->hidden + h);
      double tolerance = (c->t->id == nb_ncclBfloat16 ? 2e-2 : 1e-5) * (fabs(want) + 1);
      if (!(fabs(got - want) <= tolerance)) {
        if (bad++ < 3)
          check(0, "%s: combined token %d element %d is %g, expected %g", label(c), t, h, got, want);
        worst = fmax(worst, fabs(got - want));
      }
    }
  }
  check(bad == 0, "%s: %d combined elements wrong (worst error %g)", label(c), bad, worst);
  free(out);
}

static void run_case(ep_case *c) {
  setup(c);
  const shape *s = &c->s;
  int failures_before = g_failures;
  nb_ncclResult_t dispatched = try_dispatch(c);
  /* NCCL EP 0.2.0's kernels are documented for bf16; a type it refuses before any transfer
   * (ncclInvalidArgument / ncclInvalidUsage, on every rank alike) is a SKIP, as in ep_ranks.py. */
  if (dispatched != nb_ncclSuccess && c->t != &BF16 &&
      (dispatched == nb_ncclInvalidArgument || dispatched == nb_ncclInvalidUsage)) {
    printf("rank %d: SKIP %s: NCCL EP refuses it: %s: %s\n", g_rank, label(c), ncclbind_result_name(dispatched),
           ncclbind_last_error_code() == (int)dispatched ? ncclbind_last_error() : ncclbind_nccl_last_error());
    teardown(c);
    return;
  }
  NB_OK(dispatched);
  settle(c, "ncclEpDispatch");
  size_t row = (size_t)s->hidden * c->t->size;
  int32_t *counts = malloc(sizeof(int32_t) * c->local_experts);
  if (c->algorithm == LL) {
    char *zones = malloc((size_t)c->local_experts * c->recv_slots * row);
    check_ll_dispatch(c, zones, counts);
    /* The experts: zone le's counted rows times factor(e), written back as combine's input. */
    for (int le = 0; le < c->local_experts; le++) {
      char *rows = zones + (size_t)le * c->recv_slots * row;
      double f = expert_factor((int64_t)g_rank * c->local_experts + le);
      for (size_t i = 0; i < (size_t)counts[le] * s->hidden; i++) store(c->t, rows, i, f * load(c->t, rows, i));
      CUDA_OK(cudaMemcpy((char *)c->recv.desc.data + (size_t)le * c->recv_slots * row, rows,
                         (size_t)counts[le] * row, cudaMemcpyHostToDevice));
    }
    free(zones);
  } else {
    char *rows = malloc((size_t)c->recv_slots * row);
    int total = check_ht_dispatch(c, rows, counts);
    /* The experts of this rank, weighted (HT's forward combine only sums what comes back). */
    int64_t first = (int64_t)g_rank * c->local_experts;
    for (int i = 0; i < total; i++) {
      int src, t;
      if (identify(c, rows, (size_t)i, &src, &t) != 0) continue;
      double scale = 0;
      for (int k = 0; k < s->topk; k++) {
        int64_t e = topk_of(c, src, t)[k];
        if (e >= first && e < first + c->local_experts) scale += weight(s, k) * expert_factor(e);
      }
      for (int h = 0; h < s->hidden; h++)
        store(c->t, rows, (size_t)i * s->hidden + h, scale * token_value(src, t, h));
    }
    if (total > 0) CUDA_OK(cudaMemcpy(c->recv.desc.data, rows, (size_t)total * row, cudaMemcpyHostToDevice));
    free(rows);
  }
  free(counts);
  combine(c);
  settle(c, "ncclEpCombine");
  check_combined(c);
  if (g_rank == 0 || g_failures != failures_before)
    printf("rank %d: %s %s\n", g_rank, g_failures == failures_before ? "PASS" : "FAIL", label(c));
  teardown(c);
}

/* ---- Benchmark ----------------------------------------------------------------- */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void report(ep_case *c, const char *phase, double *times, int n) {
  qsort(times, (size_t)n, sizeof *times, by_value);
  if (g_rank == 0)
    printf("BENCH {\"layer\": \"c\", \"algo\": \"%s\", \"phase\": \"%s\", \"tokens\": %d, \"hidden\": %d, "
           "\"topk\": %d, \"experts\": %d, \"dtype\": \"%s\", \"us_median\": %.1f, \"us_p10\": %.1f}\n",
           c->algorithm == LL ? "ll" : "ht", phase, c->s.tokens, c->s.hidden, c->s.topk, c->s.experts, c->t->name,
           times[n / 2], times[n / 10]);
}

static void bench_case(ep_case *c, int iterations) {
  setup(c);
  double *d = malloc(sizeof(double) * iterations), *m = malloc(sizeof(double) * iterations);
  for (int i = -10; i < iterations; i++) { /* 10 warm-up rounds */
    double t0 = now_us();
    dispatch(c);
    CUDA_OK(cudaStreamSynchronize(c->stream));
    double t1 = now_us();
    combine(c);
    CUDA_OK(cudaStreamSynchronize(c->stream));
    double t2 = now_us();
    if (i >= 0) d[i] = t1 - t0, m[i] = t2 - t1;
  }
  report(c, "dispatch", d, iterations);
  report(c, "combine", m, iterations);
  fflush(stdout);
  free(d), free(m);
  teardown(c);
}

/* ---- Ranks --------------------------------------------------------------------------- */

static int run_rank(const char *id_file, int bench) {
  CUDA_OK(cudaSetDevice(g_rank));
  nb_ncclUniqueId id;
  if (g_rank == 0) {
    NB_OK(nb_ncclGetUniqueId(&id));
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", id_file);
    FILE *f = fopen(tmp, "wb");
    fwrite(&id, sizeof id, 1, f);
    fclose(f);
    rename(tmp, id_file);
  } else {
    for (int tries = 0;; tries++) {
      FILE *f = fopen(id_file, "rb");
      int got = f && fread(&id, sizeof id, 1, f) == 1;
      if (f) fclose(f);
      if (got) break;
      if (tries > 3000) {
        fprintf(stderr, "rank %d: no unique id in %s\n", g_rank, id_file);
        return 2;
      }
      usleep(10000);
    }
  }
  int ep_version = 0, nccl_version = 0;
  NB_OK(nb_ncclEpGetVersion(&ep_version)); /* first: a too-old libnccl is explained here */
  NB_OK(nb_ncclGetVersion(&nccl_version));
  /* NCCL EP compiles its kernels against $NCCL_HOME/include: the runtime says whether those are the
   * NCCL headers libnccl_ep was built with (the IR's kernel_headers); wrong ones fault in HT. */
  const char *headers_message = "";
  int headers = ncclbind_kernel_headers(NCCLBIND_LIB_NCCL_EP, &headers_message);
  if (g_rank == 0) printf("kernel headers: status %d: %s\n", headers, headers_message);
  if (headers == NCCLBIND_KERNEL_HEADERS_MISMATCH) {
    fprintf(stderr, "rank %d: FAIL kernel headers: %s\n", g_rank, headers_message);
    return 3;
  }
  ep_case c;
  memset(&c, 0, sizeof c);
  NB_OK(nb_ncclCommInitRank(&c.comm, g_nranks, id, g_rank));
  /* A blocking stream, as NCCL EP's own tests use (cudaStreamCreate): the legacy-stream copies and
   * memsets of setup() (tensor_alloc zeroes expert_counters / recv_total_counter, which
   * ncclEpCreateHandle then writes on this stream) are ordered before the library's work. */
  CUDA_OK(cudaStreamCreate(&c.stream));
  if (g_rank == 0) printf("libnccl %d, libnccl_ep %d, %d ranks\n", nccl_version, ep_version, g_nranks);

  const char *sizes_env = getenv("NCCLBIND_EP_SIZES"); /* "T,H,K,E;..." overrides the list */
  shape sizes[8] = {{8, 2048, 2, 16}, {64, 4096, 4, 64}, {128, 7168, 8, 256}};
  int nsizes = 3;
  if (sizes_env && *sizes_env) {
    nsizes = 0;
    for (const char *p = sizes_env; *p && nsizes < 8;) {
      shape s;
      if (sscanf(p, "%d,%d,%d,%d", &s.tokens, &s.hidden, &s.topk, &s.experts) != 4) break;
      sizes[nsizes++] = s;
      p = strchr(p, ';');
      if (!p) break;
      p++;
    }
  }
  const dtype *types[] = {&BF16, &FP32};
  int seed = 1;
  if (bench && !(sizes_env && *sizes_env)) {
    /* The sizes of tests/multigpu/ep/python/ep_bench.py, so that bench_table.py lines them up:
     * decode (128 tokens, hidden 7168, top-8 of 256 experts) first. */
    static const struct {
      algo a;
      shape s;
    } bench_sizes[] = {{LL, {128, 7168, 8, 256}}, {LL, {32, 7168, 8, 256}}, {LL, {128, 2048, 4, 64}},
                       {HT, {128, 7168, 8, 256}}, {HT, {4096, 7168, 8, 256}}};
    for (size_t i = 0; i < sizeof bench_sizes / sizeof *bench_sizes; i++) {
      c.algorithm = bench_sizes[i].a;
      c.s = bench_sizes[i].s;
      c.t = &BF16;
      c.seed = seed++;
      const char *only = getenv("NCCLBIND_EP_ALGOS"); /* "ll" or "ht": that algorithm's rows only */
      if (only && *only && strcmp(only, c.algorithm == LL ? "ll" : "ht") != 0) continue;
      if (c.s.experts % g_nranks == 0) bench_case(&c, 200);
    }
    NB_OK(nb_ncclCommDestroy(c.comm));
    return 0;
  }
  const char *algos = getenv("NCCLBIND_EP_ALGOS"); /* "ll", "ht" or unset: both */
  for (int a = 0; a < 2; a++)
    for (int i = 0; i < nsizes; i++)
      for (int d = 0; d < (bench ? 1 : 2); d++) {
        c.algorithm = a == 0 ? LL : HT;
        if (algos && *algos && strcmp(algos, a == 0 ? "ll" : "ht") != 0) continue;
        c.s = sizes[i];
        c.t = types[d];
        c.seed = seed++;
        if (c.s.experts % g_nranks != 0) {
          if (g_rank == 0) printf("SKIP %s: experts not a multiple of %d ranks\n", label(&c), g_nranks);
          continue;
        }
        if (bench) bench_case(&c, 200);
        else run_case(&c);
      }
  NB_OK(nb_ncclCommDestroy(c.comm));
  if (!bench) printf("rank %d/%d: %d checks, %d failed\n", g_rank, g_nranks, g_checks, g_failures);
  return g_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 0;
  int bench = argc > 2 && strcmp(argv[2], "--bench") == 0;
  /* CUDA must not be initialised in the parent before fork: count GPUs in a child. */
  pid_t probe = fork();
  if (probe == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess ? n : 0);
  }
  int status = 0;
  waitpid(probe, &status, 0);
  int devices = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  if (devices == 0) {
    printf("SKIPPED: no GPU (this program needs one GPU per rank)\n");
    return 77;
  }
  if (nranks <= 0) nranks = devices;
  if (nranks > devices) {
    printf("SKIPPED: %d ranks asked, %d GPUs present\n", nranks, devices);
    return 77;
  }
  char id_file[] = "/tmp/ncclbind-ep-id-XXXXXX";
  int fd = mkstemp(id_file);
  close(fd);
  unlink(id_file);
  pid_t kids[64];
  for (int r = 0; r < nranks && r < 64; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      g_rank = r, g_nranks = nranks;
      alarm(240); /* a hang fails the run instead of holding the machine */
      exit(run_rank(id_file, bench));
    }
    kids[r] = pid;
  }
  int failed = 0;
  for (int r = 0; r < nranks && r < 64; r++) {
    waitpid(kids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
  }
  unlink(id_file);
  printf("%s: %d ranks, %d passed, %d failed\n", failed ? "FAIL" : "PASS", nranks, nranks - failed, failed);
  return failed ? 1 : 0;
}
