/* The shim's core: lazy resolution of the next definitions, the mode, per-thread record
 * buffers flushed to JSONL, optional GPU time, fork safety and the tracing half of the
 * control API. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ncclbind_shim/shim_internal.h"

#define EXPORT __attribute__((visibility("default")))

int nb_shim_gate = NB_SHIM_OFF;
int nb_shim_virtual = 0;
__thread int nb_shim_depth __attribute__((tls_model("initial-exec")));
static int gpu_timing;
static uint32_t ring_capacity = 4096;

/* ---- Errors ------------------------------------------------------------ */
static __thread char last_error[512];
void nb_shim_set_error(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(last_error, sizeof last_error, format, ap);
  va_end(ap);
}
EXPORT const char *ncclbind_shim_last_error(void) {
  return last_error;
}

/* ---- Resolution -------------------------------------------------------- */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static void *nccl_handle;

static int in_shim(void *address) {
  Dl_info mine, theirs;
  return dladdr((void *)nb_shim_resolve, &mine) && dladdr(address, &theirs) && mine.dli_fbase == theirs.dli_fbase;
}

/* The libnccl to forward to when RTLD_NEXT finds none: one loaded privately (RTLD_LOCAL,
 * e.g. by a dlopen that the program's own calls reached us through), then
 * NCCLBIND_SHIM_NCCL_PATH, then the system loader's libnccl.so.2. */
static void *nccl_library(void) {
  pthread_mutex_lock(&resolve_lock);
  if (!nccl_handle) nccl_handle = dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_NOW);
  if (!nccl_handle) {
    const char *path = getenv("NCCLBIND_SHIM_NCCL_PATH");
    nccl_handle = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  }
  pthread_mutex_unlock(&resolve_lock);
  return nccl_handle;
}

void *nb_shim_resolve(nb_shim_fn *fn) {
  const int saved_errno = errno;
  void *next = dlsym(RTLD_NEXT, fn->name);
  if (next && in_shim(next)) next = NULL;
  if (!next) {
    void *library = nccl_library();
    next = library ? dlsym(library, fn->name) : NULL;
    if (next && in_shim(next)) next = NULL;
  }
  if (next) __atomic_store_n(&fn->next, next, __ATOMIC_RELEASE);
  errno = saved_errno;
  return next;
}

void nb_shim_missing(nb_shim_fn *fn) {
  if (__atomic_exchange_n(&fn->missing, 1, __ATOMIC_ACQ_REL)) return;
  const int saved_errno = errno;
  fprintf(stderr,
          "ncclbind shim: %s is not in the libnccl this process loaded; this shim is for NCCL %s "
          "(preload the variant of the loaded release: python -m ncclbind.trace run picks it)\n",
          fn->name, nb_shim_release);
  errno = saved_errno;
}

nb_shim_fn *nb_shim_find(const char *name) {
  for (int i = 0; i < nb_shim_function_count; ++i)
    if (strcmp(nb_shim_functions[i].name, name) == 0) return &nb_shim_functions[i];
  return NULL;
}

/* ---- GPU time: CUDA events through the driver, resolved on first use ----- */
typedef int (*cu_event_create_fn)(void **event, unsigned flags);
typedef int (*cu_event_record_fn)(void *event, void *stream);
typedef int (*cu_event_sync_fn)(void *event);
typedef int (*cu_event_elapsed_fn)(float *ms, void *start, void *end);
typedef int (*cu_event_destroy_fn)(void *event);
typedef int (*cu_event_query_fn)(void *event);
typedef int (*cu_ctx_fn)(void **context);
typedef int (*cu_ctx_set_fn)(void *context);
static struct {
  int tried;
  cu_event_create_fn create;
  cu_event_record_fn record;
  cu_event_sync_fn sync;
  cu_event_elapsed_fn elapsed;
  cu_event_destroy_fn destroy;
  cu_event_query_fn query;
  cu_ctx_fn get_context;
  cu_ctx_set_fn set_context;
} cu;
typedef struct gpu_pair {
  void *start, *end;
  void *context; /* the caller's: the flushing thread makes it current to read the events */
} gpu_pair;
#define CUDA_ERROR_NOT_READY 600

static int cuda_events(void) {
  if (__atomic_load_n(&cu.tried, __ATOMIC_ACQUIRE)) return cu.create != NULL;
  pthread_mutex_lock(&resolve_lock);
  if (!cu.tried) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
    if (!driver) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver) {
      cu.record = (cu_event_record_fn)dlsym(driver, "cuEventRecord");
      cu.sync = (cu_event_sync_fn)dlsym(driver, "cuEventSynchronize");
      cu.elapsed = (cu_event_elapsed_fn)dlsym(driver, "cuEventElapsedTime");
      cu.destroy = (cu_event_destroy_fn)dlsym(driver, "cuEventDestroy_v2");
      cu.query = (cu_event_query_fn)dlsym(driver, "cuEventQuery");
      cu.get_context = (cu_ctx_fn)dlsym(driver, "cuCtxGetCurrent");
      cu.set_context = (cu_ctx_set_fn)dlsym(driver, "cuCtxSetCurrent");
      cu_event_create_fn create = (cu_event_create_fn)dlsym(driver, "cuEventCreate");
      if (cu.record && cu.sync && cu.elapsed && cu.destroy && cu.query && cu.get_context && cu.set_context)
        cu.create = create;
    }
    __atomic_store_n(&cu.tried, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&resolve_lock);
  return cu.create != NULL;
}

void *nb_shim_gpu_begin(void *stream) {
  if (!__atomic_load_n(&gpu_timing, __ATOMIC_RELAXED) || !cuda_events()) return NULL;
  gpu_pair *pair = calloc(1, sizeof *pair);
  if (!pair) return NULL;
  if (cu.get_context(&pair->context) || !pair->context || cu.create(&pair->start, 0) || cu.create(&pair->end, 0) ||
      cu.record(pair->start, stream)) {
    if (pair->start) cu.destroy(pair->start);
    if (pair->end) cu.destroy(pair->end);
    free(pair);
    return NULL;
  }
  return pair;
}

void nb_shim_gpu_end(void *pair, void *stream) {
  cu.record(((gpu_pair *)pair)->end, stream);
}

/* Whether a record's GPU time can be read without waiting (the collective has run). */
static int gpu_done(void *p) {
  gpu_pair *pair = p;
  void *current = NULL;
  cu.get_context(&current);
  if (current != pair->context) cu.set_context(pair->context);
  const int done = cu.query(pair->end) != CUDA_ERROR_NOT_READY;
  if (current != pair->context) cu.set_context(current); /* a program's thread keeps its own */
  return done;
}

static double gpu_ms(void *p) {
  gpu_pair *pair = p;
  float ms = -1;
  void *current = NULL;
  cu.get_context(&current);
  if (current != pair->context) cu.set_context(pair->context);
  if (cu.sync(pair->end) != 0 || cu.elapsed(&ms, pair->start, pair->end) != 0) ms = -1;
  cu.destroy(pair->start);
  cu.destroy(pair->end);
  if (current != pair->context) cu.set_context(current);
  free(pair);
  return ms;
}

/* ---- Per-thread record rings ------------------------------------------- */
typedef struct record {
  uint64_t t0, t1;
  nb_shim_call call;
  int fn, result, group;
} record;

/* One producer (its thread) and one consumer (whoever holds flush_lock): head is written by
 * the owner only, tail by the flusher only, so the owner's fast path takes no lock. The call in
 * progress is written into the slot at head before the call and published (head + 1) after it:
 * one copy per call. */
typedef struct ring {
  record *slots;
  uint32_t capacity;
  uint64_t head, tail; /* atomic */
  long tid;
  struct ring *next;
  /* The slot at head holds the call in progress, under a sequence (mod 4: 1 being written,
   * 2 inside NCCL, 0 returned) so the flusher can copy it consistently without a lock. */
  uint64_t inflight_seq;    /* atomic */
  uint64_t pending_written; /* the flusher's: the sequence it last wrote as pending */
} ring;

static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;
static ring *rings;
/* initial-exec: one %fs-relative access, no __tls_get_addr, on every recorded call. Not static:
 * gold (Bazel's linker) gives static initial-exec variables of a shared object one slot. */
__thread ring *nb_shim_my_ring __attribute__((tls_model("initial-exec")));
__thread int nb_shim_group_depth __attribute__((tls_model("initial-exec")));
static pthread_key_t ring_key;
static int fd = -1;
static char trace_path[PATH_MAX];
static uint64_t mono0, real0;

void nb_shim_group(int delta) {
  nb_shim_group_depth += delta;
  if (nb_shim_group_depth < 0) nb_shim_group_depth = 0;
}

static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; s && *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20)
      fprintf(out, "\\u%04x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}

/* The trace file, opened on first use (so `off` writes nothing): its first lines say which
 * process it is and which communicators it already has. Called with flush_lock held. */
static void write_all(const char *text, size_t size) {
  while (size && fd >= 0) {
    ssize_t n = write(fd, text, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    size -= (size_t)n;
  }
}

static void emit_locked(const char *line) {
  write_all(line, strlen(line));
  write_all("\n", 1);
}

static int open_trace(void) {
  if (fd >= 0) return 0;
  const char *dir = getenv("NCCLBIND_SHIM_DIR");
  if (!dir || !*dir) dir = ".";
  mkdir(dir, 0777);
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  snprintf(trace_path, sizeof trace_path, "%s/trace-%s-%ld.jsonl", dir, host, (long)getpid());
  fd = open(trace_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    nb_shim_set_error("cannot open the trace %s: %s", trace_path, strerror(errno));
    trace_path[0] = 0;
    return NCCLBIND_SHIM_EIO;
  }
  int version = 0;
  nb_shim_fn *get_version = nb_shim_find("ncclGetVersion");
  void *next = get_version ? nb_shim_next(get_version) : NULL;
  if (next) ((int (*)(int *))next)(&version);
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (!out) return NCCLBIND_SHIM_EIO;
  fprintf(out, "{\"type\":\"process\",\"pid\":%ld,\"ppid\":%ld,\"host\":", (long)getpid(), (long)getppid());
  json_string(out, host);
  fprintf(out, ",\"shim_release\":\"%s\",\"nccl_version\":%d,\"mode\":%d,\"clock\":\"monotonic\",", nb_shim_release,
          version, nb_shim_mode_now());
  fprintf(out, "\"mono0\":%" PRIu64 ",\"real0\":%" PRIu64 ",\"rank_env\":", mono0, real0);
  const char *rank = getenv("RANK");
  if (!rank) rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = getenv("NCCLBIND_RANK");
  json_string(out, rank ? rank : "");
  fputc('}', out);
  fclose(out);
  emit_locked(text);
  free(text);
  nb_shim_comms_describe(emit_locked);
  return 0;
}

int nb_shim_recording(void) {
  return nb_shim_mode_now() != NB_SHIM_OFF;
}

void nb_shim_emit_line(const char *line, int described_on_open) {
  pthread_mutex_lock(&flush_lock);
  const int opened = fd < 0;
  if (open_trace() == 0 && !(opened && described_on_open)) emit_locked(line);
  pthread_mutex_unlock(&flush_lock);
}

/* The JSONL writer of records: formats into one buffer with its own number formatting (stdio's
 * costs several times a whole call in the full mode's budget). Each record reserves
 * RECORD_MAX bytes first, then is written with no bound check per field. */
typedef struct text {
  char *data;
  size_t used, capacity;
} text;

/* A record's longest form: its fixed text and numbers (under 400 bytes) and four names
 * (function, result, data type, op) of at most NAME_BYTES each. */
#define RECORD_MAX 1024

static char *reserve(text *t) {
  if (t->used + RECORD_MAX > t->capacity) {
    write_all(t->data, t->used);
    t->used = 0;
  }
  return t->data + t->used;
}
#define PUT(p, literal) (memcpy((p), (literal), sizeof(literal) - 1), (p) += sizeof(literal) - 1)

/* The generated tables' names, padded to a fixed size once at load, so a record copies each
 * with one fixed-size move (the reserve leaves room for the padding). */
#define NAME_BYTES 56
typedef struct name {
  char text[NAME_BYTES];
  size_t length;
} name;
static name *function_names, *dtype_names, *op_names, *result_names;
static name custom_op = {"custom", 6};

static name *padded_names(const char *const *texts, int count) {
  name *names = calloc((size_t)count + 1, sizeof *names);
  for (int i = 0; names && i < count; ++i) {
    names[i].length = strnlen(texts[i], NAME_BYTES);
    memcpy(names[i].text, texts[i], names[i].length);
  }
  return names;
}

static void load_names(void) {
  const char **texts = calloc((size_t)nb_shim_function_count + 1, sizeof *texts);
  for (int i = 0; texts && i < nb_shim_function_count; ++i) texts[i] = nb_shim_functions[i].name;
  function_names = texts ? padded_names(texts, nb_shim_function_count) : NULL;
  free(texts);
  dtype_names = padded_names(nb_shim_dtype_names, nb_shim_dtype_count);
  op_names = padded_names(nb_shim_op_names, nb_shim_op_count);
  result_names = padded_names(nb_shim_result_names, nb_shim_result_count);
}

static char *put_name(char *p, const name *n) {
  memcpy(p, n->text, NAME_BYTES);
  return p + n->length;
}
static const char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
static char *put_u64(char *p, uint64_t v) {
  int n = 1;
  for (uint64_t rest = v; rest >= 10; rest /= 10) ++n;
  char *q = p + n;
  while (v >= 100) {
    q -= 2;
    memcpy(q, digit_pairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10)
    memcpy(q - 2, digit_pairs + 2 * v, 2);
  else
    q[-1] = (char)('0' + v);
  return p + n;
}
static char *put_i64(char *p, int64_t v) {
  if (v >= 0) return put_u64(p, (uint64_t)v);
  *p++ = '-';
  return put_u64(p, (uint64_t)(-(v + 1)) + 1);
}
static char *put_hex(char *p, const void *address) {
  static const char hex[] = "0123456789abcdef";
  uint64_t v = (uintptr_t)address;
  const int n = v ? (64 - __builtin_clzll(v) + 3) / 4 : 1; /* "0x0" for NULL */
  PUT(p, "\"0x");
  for (int i = n - 1; i >= 0; --i, v >>= 4) p[i] = hex[v & 15];
  p += n;
  *p++ = '"';
  return p;
}

static void format_record(text *t, const record *r, long tid) {
  const nb_shim_fn *fn = &nb_shim_functions[r->fn];
  const nb_shim_call *c = &r->call;
  char *const begin = reserve(t);
  char *p = begin;
  PUT(p, "{\"type\":\"call\",\"fn\":\"");
  p = put_name(p, &function_names[r->fn]);
  PUT(p, "\",\"t\":");
  p = put_u64(p, r->t0);
  PUT(p, ",\"dur_ns\":");
  p = put_u64(p, r->t1 - r->t0);
  PUT(p, ",\"tid\":");
  p = put_i64(p, tid);
  PUT(p, ",\"group\":");
  p = put_i64(p, r->group);
  if (r->result != NB_SHIM_NO_RESULT) {
    PUT(p, ",\"rc\":");
    p = put_i64(p, r->result);
    PUT(p, ",\"result\":\"");
    if (r->result >= 0 && r->result < nb_shim_result_count) p = put_name(p, &result_names[r->result]);
    PUT(p, "\"");
  }
  if (c->comm) {
    PUT(p, ",\"comm\":");
    p = put_hex(p, c->comm);
  }
  if (c->has & NB_SHIM_HAS_BUFFERS) {
    const int known = c->dtype >= 0 && c->dtype < nb_shim_dtype_count;
    PUT(p, ",\"send\":");
    p = put_hex(p, c->send);
    PUT(p, ",\"recv\":");
    p = put_hex(p, c->recv);
    PUT(p, ",\"count\":");
    p = put_u64(p, c->count);
    PUT(p, ",\"dtype\":\"");
    if (known) p = put_name(p, &dtype_names[c->dtype]);
    PUT(p, "\",\"bytes\":");
    p = put_u64(p, known ? (uint64_t)c->count * nb_shim_dtype_bytes[c->dtype] : 0);
    if (fn->bus) {
      PUT(p, ",\"bus\":");
      p = put_u64(p, fn->bus);
      PUT(p, ",\"bus_total\":");
      p = put_u64(p, fn->bus_total);
    }
  }
  if (c->has & NB_SHIM_HAS_OP) {
    PUT(p, ",\"op\":\"");
    p = put_name(p, c->op >= 0 && c->op < nb_shim_op_count ? &op_names[c->op] : &custom_op);
    PUT(p, "\"");
  }
  if (c->has & (NB_SHIM_HAS_ROOT | NB_SHIM_HAS_PEER)) {
    if (c->has & NB_SHIM_HAS_ROOT)
      PUT(p, ",\"root\":");
    else
      PUT(p, ",\"peer\":");
    p = put_i64(p, c->rank_arg);
  }
  if (c->has & NB_SHIM_HAS_STREAM) {
    PUT(p, ",\"stream\":");
    p = put_hex(p, c->stream);
  }
  if (c->gpu) {
    const int n = snprintf(p, 48, ",\"gpu_ms\":%.6f", gpu_ms(c->gpu));
    p += n < 0 ? 0 : n < 48 ? n : 47;
  }
  PUT(p, "}\n");
  t->used += (size_t)(p - begin);
}

/* What a ring holds, to the trace, in its order; called with flush_lock held. The tail moves
 * every 64 records, so a producer waiting for room goes on early. The background flush
 * (!force) stops before a record whose collective has not run on the GPU yet (it must not wait
 * on a hung collective), and takes what its thread adds meanwhile, up to twice the ring.
 * Forced: a full ring, an explicit flush, a thread's or the process's end. */
static char format_buffer[1 << 20];
static int drain_ring(ring *g, int force, int *gpu_pending) {
  uint64_t tail = __atomic_load_n(&g->tail, __ATOMIC_RELAXED);
  uint64_t head = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);
  if (tail == head) return 0;
  const int status = open_trace();
  text t = {format_buffer, 0, sizeof format_buffer};
  const uint64_t limit = tail + 2 * (uint64_t)g->capacity;
  while (tail != head) {
    const record *r = &g->slots[tail % g->capacity];
    if (!force && r->call.gpu && !gpu_done(r->call.gpu)) {
      *gpu_pending = 1;
      break;
    }
    if (status == 0) format_record(&t, r, g->tid);
    if ((++tail & 63) == 0) __atomic_store_n(&g->tail, tail, __ATOMIC_RELEASE);
    if (tail == head && !force && tail < limit) head = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);
  }
  write_all(t.data, t.used);
  __atomic_store_n(&g->tail, tail, __ATOMIC_RELEASE);
  return status;
}

static int drain(ring *g, int force) {
  int gpu_pending = 0;
  return drain_ring(g, force, &gpu_pending);
}

static uint64_t pending_ns = 1000000000u;

/* A call that has been inside NCCL longer than pending_ns, written once as pending. Called by
 * the flusher with flush_lock held. */
static void report_inflight(ring *g, text *t) {
  const uint64_t v1 = __atomic_load_n(&g->inflight_seq, __ATOMIC_ACQUIRE);
  if (v1 % 4 != 2 || g->pending_written == v1) return;
  record copy;
  memcpy(&copy, &g->slots[__atomic_load_n(&g->head, __ATOMIC_ACQUIRE) % g->capacity], sizeof copy);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&g->inflight_seq, __ATOMIC_RELAXED) != v1) return;
  if (nb_shim_now() - copy.t0 < pending_ns) return;
  g->pending_written = v1;
  copy.t1 = copy.t0;
  copy.call.gpu = NULL; /* its events are the caller's to read */
  copy.result = NB_SHIM_NO_RESULT;
  format_record(t, &copy, g->tid);
  t->used -= 2; /* reopen the object: it is pending */
  char *p = t->data + t->used;
  PUT(p, ",\"pending\":true}\n");
  t->used = (size_t)(p - t->data);
}

static void ring_exit(void *arg) {
  pthread_mutex_lock(&flush_lock);
  drain(arg, 1);
  pthread_mutex_unlock(&flush_lock);
}

/* The background flush: every NCCLBIND_SHIM_FLUSH_MS (default 200), so a process that hangs and
 * is killed (the case a trace is most wanted for) loses at most that much, and at once when a
 * ring is half full, so a thread that records fast rarely formats its own records. */
static uint32_t flusher_wake; /* futex word: 1 once a wake is asked for or the flusher is awake */
static int flusher_started;   /* atomic, written under flush_lock; cleared in a forked child */
static ring *draining;        /* atomic: the ring the background flush is draining now */
static int flusher_polling;   /* atomic: it waits out its interval (a ring stopped at the GPU) */
static int flush_all(int with_counters, int force);
static int flush_background(int *again);

static void wake_flusher(void) {
  if (__atomic_exchange_n(&flusher_wake, 1, __ATOMIC_ACQ_REL) == 0)
    syscall(SYS_futex, &flusher_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *flusher(void *arg) {
  (void)arg;
  const char *every = getenv("NCCLBIND_SHIM_FLUSH_MS");
  const long ms = every && atol(every) > 0 ? atol(every) : 200;
  const struct timespec interval = {ms / 1000, (ms % 1000) * 1000000};
  int listen = 1, again = 0;
  for (;;) {
    if (again) {
      again = 0; /* a thread records faster than one pass drains: go on at once */
    } else if (listen) {
      __atomic_store_n(&flusher_wake, 0, __ATOMIC_RELEASE);
      syscall(SYS_futex, &flusher_wake, FUTEX_WAIT_PRIVATE, 0, &interval, NULL, 0);
      __atomic_store_n(&flusher_wake, 1, __ATOMIC_RELEASE);
    } else {
      nanosleep(&interval, NULL);
    }
    /* A ring left half full by records whose GPU events are not done would wake it on every
     * call: it listens again only once no ring is. */
    listen = !flush_background(&again);
    __atomic_store_n(&flusher_polling, !listen, __ATOMIC_RELAXED);
    pthread_mutex_lock(&flush_lock);
    text t = {format_buffer, 0, sizeof format_buffer};
    for (ring *g = rings; g; g = g->next) report_inflight(g, &t);
    if (t.used && open_trace() == 0) write_all(t.data, t.used);
    pthread_mutex_unlock(&flush_lock);
  }
  return NULL;
}

static void start_flusher(void) { /* with flush_lock held */
  if (flusher_started) return;
  __atomic_store_n(&flusher_started, 1, __ATOMIC_RELAXED);
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals go to its own threads */
  if (pthread_create(&thread, &attr, flusher, NULL) != 0) __atomic_store_n(&flusher_started, 0, __ATOMIC_RELAXED);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

static ring *new_ring(void) {
  ring *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->slots = calloc(ring_capacity, sizeof *g->slots);
  if (!g->slots) {
    free(g);
    return NULL;
  }
  g->capacity = ring_capacity;
  g->tid = (long)syscall(SYS_gettid);
  pthread_mutex_lock(&flush_lock);
  g->next = rings;
  rings = g;
  start_flusher();
  pthread_mutex_unlock(&flush_lock);
  pthread_setspecific(ring_key, g);
  return g;
}

static int full(ring *g) {
  return g->head - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) == g->capacity;
}

/* A full ring: the background flush formats it while this thread waits (a thread that records
 * faster than records can be written is held to that pace either way). Without one that takes
 * it up within a millisecond (none started, or one waiting out its interval at a record whose
 * GPU events are not done), this thread drains itself. */
static void make_room(ring *g) {
  if (__atomic_load_n(&flusher_started, __ATOMIC_RELAXED) && !__atomic_load_n(&flusher_polling, __ATOMIC_RELAXED)) {
    wake_flusher();
    const uint64_t deadline = nb_shim_now() + 1000000u;
    while (full(g) && (__atomic_load_n(&draining, __ATOMIC_ACQUIRE) == g || nb_shim_now() < deadline)) sched_yield();
    if (!full(g)) return;
  }
  pthread_mutex_lock(&flush_lock);
  drain(g, 1);
  pthread_mutex_unlock(&flush_lock);
}

void nb_shim_enter(nb_shim_fn *fn, const nb_shim_call *call, uint64_t t0) {
  ring *g = nb_shim_my_ring;
  if (__builtin_expect(!g, 0)) {
    g = nb_shim_my_ring = new_ring();
    if (!g) return;
  }
  const uint64_t head = g->head;
  if (__builtin_expect(head - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) == g->capacity, 0)) make_room(g);
  const uint64_t v = __atomic_load_n(&g->inflight_seq, __ATOMIC_RELAXED);
  __atomic_store_n(&g->inflight_seq, v + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  record *r = &g->slots[head % g->capacity];
  r->t0 = t0;
  r->call = *call;
  r->fn = (int)(fn - nb_shim_functions);
  r->group = nb_shim_group_depth;
  __atomic_store_n(&g->inflight_seq, v + 2, __ATOMIC_RELEASE);
}

void nb_shim_record(int result, uint64_t t1) {
  ring *g = nb_shim_my_ring;
  if (__builtin_expect(!g, 0)) return; /* nb_shim_enter could not make the ring */
  const uint64_t v = __atomic_load_n(&g->inflight_seq, __ATOMIC_RELAXED);
  if (v % 4 != 2) return;
  __atomic_store_n(&g->inflight_seq, v + 2, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  const uint64_t head = g->head;
  record *r = &g->slots[head % g->capacity];
  r->t1 = t1;
  r->result = result;
  r->group = nb_shim_group_depth;
  __atomic_store_n(&g->head, head + 1, __ATOMIC_RELEASE);
  if (__builtin_expect(head + 1 - __atomic_load_n(&g->tail, __ATOMIC_RELAXED) >= (g->capacity + 1) / 2, 0) &&
      !__atomic_load_n(&flusher_wake, __ATOMIC_RELAXED))
    wake_flusher();
}

/* Every ring to the trace, unforced. 1: a ring stopped half full at a record whose GPU events
 * are not done; *again: a ring is half full again (its thread records faster than a pass). */
static int flush_background(int *again) {
  int stuck = 0;
  pthread_mutex_lock(&flush_lock);
  for (ring *g = rings; g; g = g->next) {
    int gpu_pending = 0;
    __atomic_store_n(&draining, g, __ATOMIC_RELEASE);
    drain_ring(g, 0, &gpu_pending);
    __atomic_store_n(&draining, NULL, __ATOMIC_RELEASE);
    if (__atomic_load_n(&g->head, __ATOMIC_ACQUIRE) - g->tail >= (g->capacity + 1) / 2) {
      if (gpu_pending)
        stuck = 1;
      else
        *again = 1;
    }
  }
  pthread_mutex_unlock(&flush_lock);
  return stuck;
}

static int flush_all(int with_counters, int force) {
  int status = 0;
  pthread_mutex_lock(&flush_lock);
  for (ring *g = rings; g; g = g->next) {
    int s = drain(g, force);
    if (s) status = s;
  }
  if (with_counters && nb_shim_mode_now() != NB_SHIM_OFF && open_trace() == 0) {
    char line[512];
    for (int i = 0; i < nb_shim_function_count; ++i) {
      nb_shim_fn *fn = &nb_shim_functions[i];
      uint64_t calls = __atomic_load_n(&fn->calls, __ATOMIC_RELAXED);
      if (!calls) continue;
      snprintf(line, sizeof line,
               "{\"type\":\"counters\",\"fn\":\"%s\",\"calls\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"bytes\":%" PRIu64
               "}",
               fn->name, calls, __atomic_load_n(&fn->errors, __ATOMIC_RELAXED),
               __atomic_load_n(&fn->bytes, __ATOMIC_RELAXED));
      emit_locked(line);
    }
  }
  pthread_mutex_unlock(&flush_lock);
  return status;
}

/* ---- Fork: no lock is held across fork, and the child keeps no parent records ---- */
/* Lock order everywhere: flush_lock, then the registry's, then resolve_lock. */
static void before_fork(void) {
  pthread_mutex_lock(&flush_lock);
  nb_shim_lock_all();
  pthread_mutex_lock(&resolve_lock);
}
static void after_fork_parent(void) {
  pthread_mutex_unlock(&resolve_lock);
  nb_shim_unlock_all();
  pthread_mutex_unlock(&flush_lock);
}
static void after_fork_child(void) {
  /* The parent writes its own records; the child starts its own file, with its own pid. */
  for (ring *g = rings; g; g = g->next)
    __atomic_store_n(&g->tail, __atomic_load_n(&g->head, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  if (nb_shim_my_ring) nb_shim_my_ring->tid = (long)syscall(SYS_gettid);
  if (fd >= 0) close(fd);
  fd = -1;
  trace_path[0] = 0;
  flusher_started = 0; /* the parent's flusher thread is not in the child */
  flusher_wake = 0;
  flusher_polling = 0;
  if (rings) start_flusher();
  for (int i = 0; i < nb_shim_function_count; ++i) {
    nb_shim_functions[i].calls = nb_shim_functions[i].errors = nb_shim_functions[i].bytes = 0;
  }
  pthread_mutex_unlock(&resolve_lock);
  nb_shim_unlock_all();
  pthread_mutex_unlock(&flush_lock);
}

static int parse_mode(const char *text) {
  if (!text || !*text || !strcmp(text, "off") || !strcmp(text, "0")) return NB_SHIM_OFF;
  if (!strcmp(text, "counts")) return NB_SHIM_COUNTS;
  if (!strcmp(text, "full") || !strcmp(text, "1")) return NB_SHIM_FULL;
  return -1;
}

__attribute__((constructor)) static void shim_load(void) {
  mono0 = nb_shim_now();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  real0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  pthread_key_create(&ring_key, ring_exit);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  const char *mode = getenv("NCCLBIND_SHIM_MODE");
  int m = parse_mode(mode);
  if (m < 0) {
    fprintf(stderr, "ncclbind shim: NCCLBIND_SHIM_MODE=%s is not off, counts or full; the shim stays off\n", mode);
    m = NB_SHIM_OFF;
  }
  load_names();
  if (m == NB_SHIM_FULL && !(function_names && dtype_names && op_names && result_names)) {
    fprintf(stderr, "ncclbind shim: out of memory at load; the shim stays off\n");
    m = NB_SHIM_OFF;
  }
  const char *gpu = getenv("NCCLBIND_SHIM_GPU_TIME");
  gpu_timing = gpu && *gpu && strcmp(gpu, "0") != 0;
  const char *checkpoint = getenv("NCCLBIND_SHIM_CHECKPOINT");
  nb_shim_virtual = checkpoint && *checkpoint && strcmp(checkpoint, "0") != 0;
  __atomic_store_n(&nb_shim_gate, m | (nb_shim_virtual ? NB_SHIM_GATE_VIRTUAL : 0), __ATOMIC_RELEASE);
  const char *pending = getenv("NCCLBIND_SHIM_PENDING_MS");
  if (pending && atol(pending) > 0) pending_ns = (uint64_t)atol(pending) * 1000000u;
  const char *capacity = getenv("NCCLBIND_SHIM_BUFFER");
  if (capacity && atoi(capacity) > 0) ring_capacity = (uint32_t)atoi(capacity);
}

__attribute__((destructor)) static void shim_unload(void) {
  flush_all(1, 1);
}

/* ---- Control API: tracing ---------------------------------------------- */
EXPORT int ncclbind_shim_version(void) {
  return NCCLBIND_SHIM_API_VERSION;
}
EXPORT const char *ncclbind_shim_release(void) {
  return nb_shim_release;
}
EXPORT int ncclbind_shim_set_mode(int mode) {
  if (mode < NB_SHIM_OFF || mode > NB_SHIM_FULL) {
    nb_shim_set_error("mode %d is not NCCLBIND_SHIM_OFF (0), _COUNTS (1) or _FULL (2)", mode);
    return NCCLBIND_SHIM_EINVAL;
  }
  if (mode == NB_SHIM_FULL && !(function_names && dtype_names && op_names && result_names)) {
    nb_shim_set_error("the full mode's name tables could not be allocated at load (out of memory)");
    return NCCLBIND_SHIM_ESTATE;
  }
  __atomic_store_n(&nb_shim_gate, mode | (nb_shim_virtual ? NB_SHIM_GATE_VIRTUAL : 0), __ATOMIC_RELEASE);
  return 0;
}
EXPORT int ncclbind_shim_get_mode(void) {
  return nb_shim_mode_now();
}
EXPORT int ncclbind_shim_set_gpu_timing(int on) {
  if (on && !cuda_events()) {
    nb_shim_set_error(
        "GPU time needs the CUDA driver (libcuda.so.1 with cuEventRecord), which this process cannot load");
    return NCCLBIND_SHIM_ESTATE;
  }
  __atomic_store_n(&gpu_timing, on != 0, __ATOMIC_RELEASE);
  return 0;
}
EXPORT int ncclbind_shim_flush(void) {
  return flush_all(0, 1);
}
EXPORT const char *ncclbind_shim_trace_path(void) {
  return trace_path;
}
EXPORT int ncclbind_shim_function_count(void) {
  return nb_shim_function_count;
}
EXPORT int ncclbind_shim_counters(int i, const char **name, uint64_t *calls, uint64_t *errors, uint64_t *bytes) {
  if (i < 0 || i >= nb_shim_function_count) {
    nb_shim_set_error("function index %d is not in 0..%d", i, nb_shim_function_count - 1);
    return NCCLBIND_SHIM_EINVAL;
  }
  nb_shim_fn *fn = &nb_shim_functions[i];
  if (name) *name = fn->name;
  if (calls) *calls = __atomic_load_n(&fn->calls, __ATOMIC_RELAXED);
  if (errors) *errors = __atomic_load_n(&fn->errors, __ATOMIC_RELAXED);
  if (bytes) *bytes = __atomic_load_n(&fn->bytes, __ATOMIC_RELAXED);
  return 0;
}
EXPORT int ncclbind_shim_reset_counters(void) {
  for (int i = 0; i < nb_shim_function_count; ++i) {
    __atomic_store_n(&nb_shim_functions[i].calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&nb_shim_functions[i].errors, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&nb_shim_functions[i].bytes, 0, __ATOMIC_RELAXED);
  }
  return 0;
}
