/* A stand-in libnccl_ep.so for the CPU tests of ncclbind.ep (Python) and ncclbind::ep (Rust):
 * it claims NCCL EP 0.2.0 (NCCLBIND_FAKE_NCCL_EP_VERSION overrides the code), exports every
 * function of the merged EP API with its C layout (the generated mirrors of
 * bindings/c/include/ncclbind/nccl_ep.h: no NCCL EP header), checks the arguments real NCCL EP
 * asserts on (stamps, required tensors, layouts per algorithm, staged calls, the element types of
 * received ids and counters per mode) and logs each call. Where libnccl_ep 0.2.0 asserts on the
 * group's state (the mask calls on a group without enable_mask, ncclEpMaskClean before its LL RDMA
 * buffer exists), the stand-in aborts the process as the real one does, with the real one's
 * assertion text on stderr: the bindings must refuse those calls before they reach it.
 * Groups and handles are never freed, so a call with a destroyed one is counted
 * (fakeEpUsedAfterFree), not a crash. One-rank groups move data on host memory for the LL
 * expert-major layout: dispatch copies each token to its experts' rows (any element type) and
 * combine sums the expert rows weighted by topk_weights (float32 only). Nothing here is real
 * NCCL EP. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ncclbind/nccl_ep.h>

#define API __attribute__((visibility("default")))

#define ok nb_ncclSuccess
#define unhandled_cuda_error nb_ncclUnhandledCudaError
#define invalid_argument nb_ncclInvalidArgument
#define invalid_usage nb_ncclInvalidUsage
#define EP_MAGIC 0xC00FFFEEu
#define TENSOR_MAGIC 0xCAFECAFEu
#define TENSOR_DYNAMIC_MAGIC 0xD1A4D1A4u
#define GROUP_ALIVE 0x47524f55u
#define HANDLE_ALIVE 0x48414e44u

static const size_t type_size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1, 1};

struct nb_ncclEpGroup {
  unsigned alive;
  void *comm;
  nb_ncclEpGroupConfig_t config;
  void *buffer; /* from alloc_fn, released with free_fn at destroy */
  int nranks, mask_enabled, async_error;
  int rdma_buffer; /* LL: at creation for an explicit rdma_buffer_size, else at the first handle */
  int mask[64];
};

struct nb_ncclEpHandle {
  unsigned alive;
  struct nb_ncclEpGroup *group;
  nb_ncclEpLayout_t layout;
  int num_topk;
  size_t num_tokens;
  const void *topk_idx;  /* the routing's device (here host) address */
  nb_ncclDataType_t idx_type;
  void *memory;          /* from alloc_fn when the library allocates */
  int staged;            /* a send_only dispatch/combine waits for ncclEpComplete */
};

/* ---- what the tests read back -------------------------------------------------------------- */
static char call_log[1 << 16];
static size_t call_log_used;
static int used_after_free, next_nranks = 1;
static void log_call(const char *format, ...) __attribute__((format(printf, 1, 2)));
static int logging = 1;
/* fakeEpSetLogging(0): calls are not logged (a benchmark of the binding's own cost). */
API void fakeEpSetLogging(int on) { logging = on; }
static void log_call(const char *format, ...) {
  if (!logging) return;
  va_list args;
  va_start(args, format);
  int n = vsnprintf(call_log + call_log_used, sizeof call_log - call_log_used, format, args);
  va_end(args);
  if (n > 0 && call_log_used + (size_t)n + 1 < sizeof call_log) {
    call_log_used += (size_t)n;
    call_log[call_log_used++] = '\n';
    call_log[call_log_used] = 0;
  }
}
/* fakeEpCallLog: one line per call, "<function> <arguments...>" (addresses as %p), cleared by
 * fakeEpClearCallLog. fakeEpSetNranks: the rank count of the next groups (the fake cannot ask
 * the communicator; default 1). fakeEpUsedAfterFree: calls given a destroyed group or handle. */
API const char *fakeEpCallLog(void) { return call_log; }
API void fakeEpClearCallLog(void) {
  call_log_used = 0;
  call_log[0] = 0;
}
API void fakeEpSetNranks(int nranks) { next_nranks = nranks; }
API int fakeEpUsedAfterFree(void) { return used_after_free; }
/* fakeEpFailNext: the next ncclEpUpdateHandle, ncclEpDispatch, ncclEpCombine or ncclEpComplete
 * returns `code` at once, setting no error text (as NCCL EP sets none of its own); 0: none fails. */
static int fail_next;
API void fakeEpFailNext(int code) { fail_next = code; }
static int failing(void) {
  int code = fail_next;
  fail_next = 0;
  return code;
}
/* fakeEpSetAsyncError: the group's asynchronous error flag (what a timeout would set). */
API void fakeEpSetAsyncError(nb_ncclEpGroup_t group, int value) { group->async_error = value; }

static int group_ok(nb_ncclEpGroup_t g) {
  if (!g) return 0;
  if (g->alive != GROUP_ALIVE) {
    used_after_free++;
    return 0;
  }
  return 1;
}

static int handle_ok(nb_ncclEpHandle_t h) {
  if (!h) return 0;
  if (h->alive != HANDLE_ALIVE || h->group->alive != GROUP_ALIVE) {
    used_after_free++;
    return 0;
  }
  return 1;
}

static int tensor_ok(const nb_ncclEpTensor_t *t) {
  return t && (t->magic == TENSOR_MAGIC || t->magic == TENSOR_DYNAMIC_MAGIC) && t->ndim >= 1 && t->sizes &&
         (unsigned)t->datatype < sizeof type_size / sizeof *type_size;
}

static const char *shape(const nb_ncclEpTensor_t *t, char *out, size_t size) {
  if (!t) return "-";
  size_t used = (size_t)snprintf(out, size, "%d:", (int)t->datatype);
  for (unsigned i = 0; i < t->ndim && used < size; ++i)
    used += (size_t)snprintf(out + used, size - used, i ? "x%zu" : "%zu", t->sizes[i]);
  return out;
}

static int stamped(unsigned size, unsigned magic, unsigned expected_size) {
  return magic == EP_MAGIC && size >= expected_size;
}

/* libnccl_ep 0.2.0's host asserts throw a C++ exception nothing catches: the process ends. */
static void ep_assert(int holds, const char *text) {
  if (holds) return;
  fprintf(stderr, "libnccl_ep stand-in: EP_HOST_ASSERT failed: %s\n", text);
  fflush(stderr);
  abort();
}

/* ---- the API ------------------------------------------------------------------------------- */
API nb_ncclResult_t ncclEpGetVersion(int *version) {
  const char *forced = getenv("NCCLBIND_FAKE_NCCL_EP_VERSION");
  if (!version) return invalid_argument;
  *version = forced ? atoi(forced) : 200;
  return ok;
}

API nb_ncclResult_t ncclEpTensorAlloc(nb_ncclEpTensor_t **tensor, unsigned int ndim, nb_ncclDataType_t datatype,
                                      const size_t *sizes, const nb_ncclEpTensorAllocConfig_t *config) {
  if (!tensor || ndim == 0 || !sizes || (unsigned)datatype >= sizeof type_size / sizeof *type_size)
    return invalid_argument;
  if (config && !stamped(config->size, config->magic, 8)) return invalid_argument;
  nb_ncclEpTensor_t *t = calloc(1, sizeof *t);
  size_t *copy = calloc(ndim, sizeof *copy);
  memcpy(copy, sizes, ndim * sizeof *copy);
  t->size = sizeof *t;
  t->magic = TENSOR_DYNAMIC_MAGIC;
  t->ndim = ndim;
  t->datatype = datatype;
  t->sizes = copy;
  *tensor = t;
  char s[96];
  log_call("tensor_alloc %p %s", (void *)t, shape(t, s, sizeof s));
  return ok;
}

API nb_ncclResult_t ncclEpTensorDestroy(nb_ncclEpTensor_t *tensor) {
  log_call("tensor_destroy %p", (void *)tensor);
  if (!tensor) return ok;
  if (tensor->magic != TENSOR_DYNAMIC_MAGIC) return invalid_argument;
  tensor->magic = 0;
  free(tensor->sizes);
  free(tensor);
  return ok;
}

API nb_ncclResult_t ncclEpCreateGroup(nb_ncclEpGroup_t *ep_group, nb_ncclComm_t comm,
                                      const nb_ncclEpGroupConfig_t *config) {
  if (!ep_group || !comm || !config) return invalid_argument;
  if (!stamped(config->size, config->magic, NB_NCCL_EP_GROUP_CONFIG_V1_SIZE) || config->version == 0)
    return invalid_argument;
  if (config->num_experts == 0 || config->max_dispatch_tokens_per_rank == 0 ||
      config->algorithm > nb_NCCL_EP_ALGO_HIGH_THROUGHPUT)
    return invalid_argument;
  if (config->num_experts % (unsigned)next_nranks) return invalid_argument;
  struct nb_ncclEpGroup *g = calloc(1, sizeof *g);
  g->alive = GROUP_ALIVE;
  g->comm = comm;
  g->config = *config;
  g->nranks = next_nranks;
  /* libnccl_ep 0.2.0 allocates the mask buffer and error flag for an LL group with enable_mask only */
  g->mask_enabled = config->enable_mask != 0 && config->algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY;
  g->rdma_buffer = config->algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY && config->rdma_buffer_size != 0;
  for (int i = 0; i < 64; ++i) g->mask[i] = 1;
  if (config->alloc.alloc_fn) {
    int err = config->alloc.alloc_fn(&g->buffer, 4096, config->alloc.context);
    if (err) {
      free(g);
      log_call("create_group failed alloc_fn %d", err);
      return unhandled_cuda_error;
    }
  }
  *ep_group = g;
  log_call("create_group %p %p algo=%d experts=%u max_tokens=%u", (void *)g, (void *)comm, (int)config->algorithm,
           config->num_experts, config->max_dispatch_tokens_per_rank);
  return ok;
}

API nb_ncclResult_t ncclEpGroupDestroy(nb_ncclEpGroup_t ep_group) {
  log_call("group_destroy %p", (void *)ep_group);
  if (!group_ok(ep_group)) return invalid_argument;
  ep_group->alive = 0;
  if (ep_group->buffer && ep_group->config.alloc.free_fn)
    ep_group->config.alloc.free_fn(ep_group->buffer, ep_group->config.alloc.context);
  return ok; /* never freed: a later call with it is counted, not a crash */
}

static int layout_fits(nb_ncclEpGroup_t g, nb_ncclEpLayout_t layout) {
  if (g->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY)
    return layout == nb_NCCL_EP_LAYOUT_EXPERT_MAJOR || layout == nb_NCCL_EP_LAYOUT_RANK_MAJOR;
  return layout == nb_NCCL_EP_LAYOUT_EXPERT_MAJOR || layout == nb_NCCL_EP_LAYOUT_FLAT;
}

static int routing_ok(nb_ncclEpHandle_t h, const nb_ncclEpTensor_t *topk_idx) {
  if (!tensor_ok(topk_idx) || topk_idx->ndim != 2) return 0;
  if (topk_idx->datatype != nb_ncclInt32 && topk_idx->datatype != nb_ncclInt64) return 0;
  if (topk_idx->sizes[0] > h->group->config.max_dispatch_tokens_per_rank) return 0;
  h->num_tokens = topk_idx->sizes[0];
  h->num_topk = (int)topk_idx->sizes[1];
  h->topk_idx = topk_idx->data;
  h->idx_type = topk_idx->datatype;
  return 1;
}

/* "HT flat: recv_expert_counter must be ncclInt32" (an assert of libnccl_ep 0.2.0, at handle time). */
static int counters_fit(nb_ncclEpHandle_t h, const nb_ncclEpLayoutInfo_t *info) {
  return !(info && info->expert_counters && h->group->config.algorithm == nb_NCCL_EP_ALGO_HIGH_THROUGHPUT &&
           h->layout == nb_NCCL_EP_LAYOUT_FLAT && info->expert_counters->datatype != nb_ncclInt32);
}

static nb_ncclResult_t new_handle(nb_ncclEpHandle_t *handle, nb_ncclEpGroup_t g, nb_ncclEpLayout_t layout,
                                  const nb_ncclEpHandleConfig_t *config, const nb_ncclEpTensor_t *handle_mem,
                                  nb_ncclEpHandle_t *made) {
  if (!handle || !group_ok(g) || !layout_fits(g, layout)) return invalid_argument;
  if (config && !stamped(config->size, config->magic, NB_NCCL_EP_HANDLE_CONFIG_V1_SIZE)) return invalid_argument;
  if (handle_mem && (!tensor_ok(handle_mem) || handle_mem->ndim != 1 || handle_mem->datatype != nb_ncclUint8))
    return invalid_argument;
  struct nb_ncclEpHandle *h = calloc(1, sizeof *h);
  h->alive = HANDLE_ALIVE;
  h->group = g;
  h->layout = layout;
  *made = h;
  return ok;
}

/* A handle was made: an LL group's RDMA buffer now exists (libnccl_ep sizes it lazily). */
static void handle_made(nb_ncclEpGroup_t g) {
  if (g->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY) g->rdma_buffer = 1;
}

API nb_ncclResult_t ncclEpCreateHandle(nb_ncclEpHandle_t *handle, nb_ncclEpGroup_t ep_group, nb_ncclEpLayout_t layout,
                                       const nb_ncclEpTensor_t *topk_idx, const nb_ncclEpLayoutInfo_t *layout_info,
                                       const nb_ncclEpHandleConfig_t *config, void *stream) {
  nb_ncclEpHandle_t h;
  nb_ncclResult_t r = new_handle(handle, ep_group, layout, config, NULL, &h);
  if (r != ok) return r;
  if (layout_info && (!stamped(layout_info->size, layout_info->magic, NB_NCCL_EP_LAYOUT_INFO_V1_SIZE) ||
                      ep_group->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY)) {
    free(h);
    return invalid_argument;
  }
  if (!routing_ok(h, topk_idx) || !counters_fit(h, layout_info)) {
    free(h);
    return invalid_argument;
  }
  if (ep_group->config.alloc.alloc_fn) ep_group->config.alloc.alloc_fn(&h->memory, 1024, ep_group->config.alloc.context);
  char s[96];
  handle_made(ep_group);
  log_call("create_handle %p %p layout=%d topk_idx=%s layout_info=%p config=%p stream=%p", (void *)h,
           (void *)ep_group, (int)layout, shape(topk_idx, s, sizeof s), (const void *)layout_info,
           (const void *)config, stream);
  *handle = h;
  return ok;
}

API nb_ncclResult_t ncclEpInitHandle(nb_ncclEpHandle_t *handle, nb_ncclEpGroup_t ep_group, nb_ncclEpLayout_t layout,
                                     const nb_ncclEpHandleConfig_t *config, int num_topk,
                                     const nb_ncclEpTensor_t *handle_mem) {
  nb_ncclEpHandle_t h;
  nb_ncclResult_t r = new_handle(handle, ep_group, layout, config, handle_mem, &h);
  if (r != ok) return r;
  if (ep_group->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY && num_topk <= 0) {
    free(h);
    return invalid_argument;
  }
  h->num_topk = num_topk;
  if (!handle_mem && ep_group->config.alloc.alloc_fn)
    ep_group->config.alloc.alloc_fn(&h->memory, 1024, ep_group->config.alloc.context);
  handle_made(ep_group);
  log_call("init_handle %p %p layout=%d num_topk=%d handle_mem=%p", (void *)h, (void *)ep_group, (int)layout, num_topk,
           (const void *)handle_mem);
  *handle = h;
  return ok;
}

API nb_ncclResult_t ncclEpHandleMemSize(nb_ncclEpGroup_t ep_group, nb_ncclEpLayout_t layout,
                                        const nb_ncclEpHandleConfig_t *config, size_t *size_out, int num_topk) {
  if (!group_ok(ep_group) || !size_out || !layout_fits(ep_group, layout)) return invalid_argument;
  if (config && !stamped(config->size, config->magic, NB_NCCL_EP_HANDLE_CONFIG_V1_SIZE)) return invalid_argument;
  *size_out = 4096 * (size_t)(num_topk > 0 ? num_topk : 1);
  log_call("handle_mem_size %p layout=%d num_topk=%d", (void *)ep_group, (int)layout, num_topk);
  return ok;
}

API nb_ncclResult_t ncclEpUpdateHandle(nb_ncclEpHandle_t handle, const nb_ncclEpTensor_t *topk_idx,
                                       const nb_ncclEpLayoutInfo_t *layout_info, void *stream) {
  if (fail_next) return failing();
  if (!handle_ok(handle)) return invalid_argument;
  if (layout_info && handle->group->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY) return invalid_argument;
  if (!routing_ok(handle, topk_idx) || !counters_fit(handle, layout_info)) return invalid_argument;
  char s[96];
  log_call("update_handle %p topk_idx=%s layout_info=%p stream=%p", (void *)handle, shape(topk_idx, s, sizeof s),
           (const void *)layout_info, stream);
  return ok;
}

API nb_ncclResult_t ncclEpHandleDestroy(nb_ncclEpHandle_t handle) {
  log_call("handle_destroy %p", (void *)handle);
  if (!handle_ok(handle)) return invalid_argument;
  handle->alive = 0;
  nb_ncclEpGroup_t g = handle->group;
  if (handle->memory && g->config.alloc.free_fn) g->config.alloc.free_fn(handle->memory, g->config.alloc.context);
  return ok;
}

static long long expert_of(nb_ncclEpHandle_t h, size_t token, int k) {
  size_t i = token * (size_t)h->num_topk + (size_t)k;
  return h->idx_type == nb_ncclInt64 ? ((const int64_t *)h->topk_idx)[i] : ((const int32_t *)h->topk_idx)[i];
}

/* One rank, LL expert-major: token t goes to row (e, slot) of every expert e it names. */
static void dispatch_one_rank(nb_ncclEpHandle_t h, const nb_ncclEpDispatchInputs_t *in,
                              const nb_ncclEpDispatchOutputs_t *out, const nb_ncclEpLayoutInfo_t *info) {
  const nb_ncclEpTensor_t *src = in->tokens, *dst = out->tokens;
  if (!src->data || !dst->data || dst->ndim != 3 || src->datatype != dst->datatype) return;
  size_t row = src->sizes[1] * type_size[src->datatype], experts = dst->sizes[0], slots = dst->sizes[1];
  size_t count[1024] = {0};
  for (size_t t = 0; t < h->num_tokens; ++t)
    for (int k = 0; k < h->num_topk; ++k) {
      long long e = expert_of(h, t, k);
      if (e < 0 || (size_t)e >= experts || experts > 1024 || count[e] >= slots) continue;
      memcpy((char *)dst->data + ((size_t)e * slots + count[e]++) * row, (const char *)src->data + t * row, row);
    }
  if (info && info->expert_counters && info->expert_counters->data)
    for (size_t e = 0; e < experts && e < 1024; ++e) {
      if (info->expert_counters->datatype == nb_ncclInt64) ((int64_t *)info->expert_counters->data)[e] = (int64_t)count[e];
      else ((int32_t *)info->expert_counters->data)[e] = (int32_t)count[e];
    }
}

/* The element types libnccl_ep 0.2.0 asserts per mode at dispatch: received expert ids int32 in
 * LL rank-major and int64 in HT flat, LL expert-major's expert counters int32. */
static int received_types_fit(nb_ncclEpHandle_t h, const nb_ncclEpDispatchOutputs_t *out,
                              const nb_ncclEpLayoutInfo_t *info) {
  int ll = h->group->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY;
  const nb_ncclEpTensor_t *ids = out->topk_idx;
  if (ids && ll && h->layout == nb_NCCL_EP_LAYOUT_RANK_MAJOR && ids->datatype != nb_ncclInt32) return 0;
  if (ids && !ll && h->layout == nb_NCCL_EP_LAYOUT_FLAT && ids->datatype != nb_ncclInt64) return 0;
  if (info && info->expert_counters && ll && h->layout == nb_NCCL_EP_LAYOUT_EXPERT_MAJOR &&
      info->expert_counters->datatype != nb_ncclInt32)
    return 0;
  return 1;
}

API nb_ncclResult_t ncclEpDispatch(nb_ncclEpHandle_t handle, const nb_ncclEpDispatchInputs_t *inputs,
                                   const nb_ncclEpDispatchOutputs_t *outputs, const nb_ncclEpLayoutInfo_t *layout_info,
                                   const nb_ncclEpDispatchConfig_t *config, void *stream) {
  if (fail_next) return failing();
  if (!handle_ok(handle) || !inputs || !outputs) return invalid_argument;
  if (!stamped(inputs->size, inputs->magic, NB_NCCL_EP_DISPATCH_INPUTS_V1_SIZE) ||
      !stamped(outputs->size, outputs->magic, NB_NCCL_EP_DISPATCH_OUTPUTS_V1_SIZE))
    return invalid_argument;
  if (!tensor_ok(inputs->tokens) || !tensor_ok(outputs->tokens)) return invalid_argument;
  if (config && !stamped(config->size, config->magic, NB_NCCL_EP_DISPATCH_CONFIG_V1_SIZE)) return invalid_argument;
  if (layout_info && !stamped(layout_info->size, layout_info->magic, NB_NCCL_EP_LAYOUT_INFO_V1_SIZE))
    return invalid_argument;
  int ll = handle->group->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY;
  if (config && config->send_only && !ll) return invalid_usage;
  if (handle->staged) return invalid_usage;
  /* real NCCL EP 0.2.0 asserts these (aborting); the stand-in refuses them */
  if (!received_types_fit(handle, outputs, layout_info)) return invalid_argument;
  if (ll && handle->layout == nb_NCCL_EP_LAYOUT_EXPERT_MAJOR && handle->group->nranks == 1)
    dispatch_one_rank(handle, inputs, outputs, layout_info);
  handle->staged = config && config->send_only;
  char a[96], b[96];
  log_call("dispatch %p tokens=%s out=%s topk_weights=%p layout_info=%p send_only=%u stream=%p", (void *)handle,
           shape(inputs->tokens, a, sizeof a), shape(outputs->tokens, b, sizeof b), (void *)inputs->topk_weights,
           (const void *)layout_info, config ? config->send_only : 0u, stream);
  return ok;
}

/* One rank, LL expert-major, float32: out[t] = sum over k of weight[t, k] * in[e_k, slot of t in e_k]. */
static void combine_one_rank(nb_ncclEpHandle_t h, const nb_ncclEpCombineInputs_t *in,
                             const nb_ncclEpCombineOutputs_t *out) {
  const nb_ncclEpTensor_t *src = in->tokens, *dst = out->tokens, *w = out->topk_weights;
  if (!src->data || !dst->data || src->ndim != 3 || src->datatype != nb_ncclFloat32 ||
      dst->datatype != nb_ncclFloat32)
    return;
  size_t hidden = src->sizes[2], experts = src->sizes[0], slots = src->sizes[1];
  size_t count[1024] = {0};
  float *o = dst->data;
  memset(o, 0, h->num_tokens * hidden * sizeof *o);
  for (size_t t = 0; t < h->num_tokens; ++t)
    for (int k = 0; k < h->num_topk; ++k) {
      long long e = expert_of(h, t, k);
      if (e < 0 || (size_t)e >= experts || experts > 1024 || count[e] >= slots) continue;
      const float *row = (const float *)src->data + ((size_t)e * slots + count[e]++) * hidden;
      float weight = w && w->data ? ((const float *)w->data)[t * (size_t)h->num_topk + (size_t)k] : 1.0f;
      for (size_t j = 0; j < hidden; ++j) o[t * hidden + j] += weight * row[j];
    }
}

API nb_ncclResult_t ncclEpCombine(nb_ncclEpHandle_t handle, const nb_ncclEpCombineInputs_t *inputs,
                                  const nb_ncclEpCombineOutputs_t *outputs, const nb_ncclEpCombineConfig_t *config,
                                  void *stream) {
  if (fail_next) return failing();
  if (!handle_ok(handle) || !inputs || !outputs) return invalid_argument;
  if (!stamped(inputs->size, inputs->magic, NB_NCCL_EP_COMBINE_INPUTS_V1_SIZE) ||
      !stamped(outputs->size, outputs->magic, NB_NCCL_EP_COMBINE_OUTPUTS_V1_SIZE))
    return invalid_argument;
  if (!tensor_ok(inputs->tokens) || !tensor_ok(outputs->tokens)) return invalid_argument;
  if (config && !stamped(config->size, config->magic, NB_NCCL_EP_COMBINE_CONFIG_V1_SIZE)) return invalid_argument;
  int ll = handle->group->config.algorithm == nb_NCCL_EP_ALGO_LOW_LATENCY;
  if (config && config->send_only && !ll) return invalid_usage;
  if (handle->staged) return invalid_usage;
  if (ll && handle->layout == nb_NCCL_EP_LAYOUT_EXPERT_MAJOR && handle->group->nranks == 1)
    combine_one_rank(handle, inputs, outputs);
  handle->staged = config && config->send_only;
  char a[96], b[96];
  log_call("combine %p tokens=%s out=%s send_only=%u stream=%p", (void *)handle, shape(inputs->tokens, a, sizeof a),
           shape(outputs->tokens, b, sizeof b), config ? config->send_only : 0u, stream);
  return ok;
}

API nb_ncclResult_t ncclEpComplete(nb_ncclEpHandle_t handle, const nb_ncclEpCompleteConfig_t *config, void *stream) {
  if (fail_next) return failing();
  if (!handle_ok(handle)) return invalid_argument;
  if (config && !stamped(config->size, config->magic, NB_NCCL_EP_COMPLETE_CONFIG_V1_SIZE)) return invalid_argument;
  if (!handle->staged) return invalid_usage; /* nothing staged to complete */
  handle->staged = 0;
  log_call("complete %p stream=%p", (void *)handle, stream);
  return ok;
}

API nb_ncclResult_t ncclEpMaskQuery(nb_ncclEpGroup_t ep_group, int *mask_status, void *stream) {
  if (!group_ok(ep_group) || !mask_status) return invalid_argument;
  ep_assert(ep_group->mask_enabled, "ep_group->mask_buffer != nullptr && \"ncclEpMaskQuery: enable_mask must be true\"");
  memcpy(mask_status, ep_group->mask, (size_t)ep_group->nranks * sizeof *mask_status);
  log_call("mask_query %p %p stream=%p", (void *)ep_group, (void *)mask_status, stream);
  return ok;
}

API nb_ncclResult_t ncclEpMaskUpdate(nb_ncclEpGroup_t ep_group, const int *mask, void *stream) {
  if (!group_ok(ep_group) || !mask) return invalid_argument;
  ep_assert(ep_group->mask_enabled, "ep_group->mask_buffer != nullptr && \"ncclEpMaskUpdate: enable_mask must be true\"");
  memcpy(ep_group->mask, mask, (size_t)ep_group->nranks * sizeof *mask);
  log_call("mask_update %p %d stream=%p", (void *)ep_group, mask[0], stream);
  return ok;
}

API nb_ncclResult_t ncclEpMaskClean(nb_ncclEpGroup_t ep_group, void *stream) {
  if (!group_ok(ep_group)) return invalid_argument;
  ep_assert(ep_group->mask_enabled, "ep_group->mask_buffer != nullptr && \"ncclEpMaskClean: enable_mask must be true\"");
  ep_assert(ep_group->rdma_buffer, "ep_group->rdma_buffer != nullptr && \"ncclEpMaskClean: rdma_buffer not yet "
                                   "allocated; create at least one LL handle first\"");
  for (int i = 0; i < 64; ++i) ep_group->mask[i] = 1;
  log_call("mask_clean %p stream=%p", (void *)ep_group, stream);
  return ok;
}

API nb_ncclResult_t ncclEpGetAsyncError(nb_ncclEpGroup_t ep_group, int *error_out) {
  if (!group_ok(ep_group) || !error_out) return invalid_argument;
  ep_assert(ep_group->mask_enabled,
            "ep_group->async_error_flag != nullptr && \"ncclEpGetAsyncError: enable_mask must be true\"");
  *error_out = ep_group->async_error;
  return ok;
}

API nb_ncclResult_t ncclEpErrorClear(nb_ncclEpGroup_t ep_group) {
  if (!group_ok(ep_group)) return invalid_argument;
  ep_assert(ep_group->mask_enabled, "ep_group->async_error_flag != nullptr && \"ncclEpErrorClear: enable_mask must be true\"");
  ep_group->async_error = 0;
  log_call("error_clear %p", (void *)ep_group);
  return ok;
}
