/* One rank of the C backend of ncclbind.bench: the generated nb_* calls over the runtime,
 * driven by the same arguments and printing the same JSON lines as the Python worker
 * (bindings/python/ncclbind/bench/worker.py says the protocol; collectives.py the fill
 * pattern, which value() below computes alike; the layouts and what each rank receives are
 * bench/cli/generated/collectives.h, rendered from policy/vocabulary.toml).
 *
 * The CUDA runtime and driver are loaded with dlopen, so this builds with gcc alone and, with
 * --host-memory, runs on a CPU machine over a stand-in libnccl (tests/python/test_bench_cli.py).
 * Build: bench/cli/c/build.sh. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ncclbind/data_types.h>

#include "../generated/collectives.h"
#include <ncclbind/nccl.h>

/* ---- the CUDA runtime and driver, loaded on first use ---------------------------------- */
static struct {
  int (*set_device)(int);
  int (*malloc)(void **, size_t);
  int (*free)(void *);
  int (*memcpy)(void *, const void *, size_t, int);
  int (*memset)(void *, int, size_t);
  int (*stream_create)(void **, unsigned);
  int (*stream_synchronize)(void *);
  int (*device_synchronize)(void);
  int (*stream_destroy)(void *);
  const char *(*error_string)(int);
} cuda;
static int host_memory;

static void die(const char *what, const char *why) {
  fprintf(stderr, "ncclbind_bench_worker_c: %s: %s\n", what, why);
  exit(1);
}

static void *symbol(void *lib, const char *name, const char *lib_name) {
  void *fn = dlsym(lib, name);
  if (!fn) die(lib_name, dlerror());
  return fn;
}

static void load_cuda(void) {
  const char *names[] = {getenv("NCCLBIND_CUDART_PATH"), "libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof *names && !lib; ++i)
    if (names[i]) lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) die("libcudart", "not found (set NCCLBIND_CUDART_PATH)");
  *(void **)&cuda.set_device = symbol(lib, "cudaSetDevice", "libcudart");
  *(void **)&cuda.malloc = symbol(lib, "cudaMalloc", "libcudart");
  *(void **)&cuda.free = symbol(lib, "cudaFree", "libcudart");
  *(void **)&cuda.memcpy = symbol(lib, "cudaMemcpy", "libcudart");
  *(void **)&cuda.memset = symbol(lib, "cudaMemset", "libcudart");
  *(void **)&cuda.stream_create = symbol(lib, "cudaStreamCreateWithFlags", "libcudart");
  *(void **)&cuda.stream_synchronize = symbol(lib, "cudaStreamSynchronize", "libcudart");
  *(void **)&cuda.device_synchronize = symbol(lib, "cudaDeviceSynchronize", "libcudart");
  *(void **)&cuda.stream_destroy = symbol(lib, "cudaStreamDestroy", "libcudart");
  *(void **)&cuda.error_string = symbol(lib, "cudaGetErrorString", "libcudart");
}

static void cuda_check(const char *call, int code) {
  if (code != 0) die(call, cuda.error_string(code));
}

static void nccl_check(const char *call, nb_ncclResult_t r) {
  if (r == nb_ncclSuccess) return;
  const char *why = ncclbind_last_error_code() == (int)r ? ncclbind_last_error() : ncclbind_nccl_last_error();
  fprintf(stderr, "ncclbind_bench_worker_c: %s: %s: %s\n", call, ncclbind_result_name(r), why);
  exit(1);
}

/* The device's name and PCI bus through the driver API (stable signatures across releases). */
static void device_name(int ordinal, char *name, int size, int *bus) {
  snprintf(name, (size_t)size, "%s", host_memory ? "host memory (stand-in)" : "?");
  *bus = 0;
  if (host_memory) return;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(lib, "cuDeviceGet");
  int (*get_name)(char *, int, int) = (int (*)(char *, int, int))dlsym(lib, "cuDeviceGetName");
  int (*attribute)(int *, int, int) = (int (*)(int *, int, int))dlsym(lib, "cuDeviceGetAttribute");
  int dev;
  if (!init || !get || !get_name || init(0) != 0 || get(&dev, ordinal) != 0) return;
  get_name(name, size, dev);
  if (attribute) attribute(bus, 33 /* CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */, dev);
}

/* ---- data types: nccl-tests' (int8 .. bfloat16; the values are small integers) ----
 * Sizes and names are policy/vocabulary.toml's (ncclbind/data_types.h); --dtype takes a
 * type's nccl-tests name, and store / load below write and read each such type. */
static size_t type_size(int type) {
  return nb_data_types[type].bytes;
}

static int dtype_index(const char *name) {
  for (int i = 0; i < NB_DATA_TYPE_COUNT; ++i)
    if (nb_data_types[i].nccl_tests && !strcmp(name, nb_data_types[i].nccl_tests)) return i;
  die("--dtype", name);
  return -1;
}

static uint16_t to_half(float f) { /* exact for the small integers and halves this worker writes */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xff, mant = x & 0x7fffffu;
  if (exp == 0) return (uint16_t)sign;
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) return (uint16_t)sign;
  return (uint16_t)(sign | ((uint32_t)e << 10) | (mant >> 13));
}
static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
  if (exp == 0) {
    float f = ldexpf((float)mant, -24);
    return sign ? -f : f;
  }
  x = sign | ((exp == 31 ? 255 : exp - 15 + 127) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void store(int type, void *base, size_t i, double v) {
  char *p = (char *)base + i * type_size(type);
  switch (type) {
    case 0: *(int8_t *)p = (int8_t)v; break;
    case 1: *(uint8_t *)p = (uint8_t)v; break;
    case 2: *(int32_t *)p = (int32_t)v; break;
    case 3: *(uint32_t *)p = (uint32_t)v; break;
    case 4: *(int64_t *)p = (int64_t)v; break;
    case 5: *(uint64_t *)p = (uint64_t)v; break;
    case 6: *(uint16_t *)p = to_half((float)v); break;
    case 7: *(float *)p = (float)v; break;
    case 8: *(double *)p = v; break;
    case 9: {
      float f = (float)v;
      uint32_t x;
      memcpy(&x, &f, 4);
      *(uint16_t *)p = (uint16_t)(x >> 16);
      break;
    }
  }
}

static double load(int type, const void *base, size_t i) {
  const char *p = (const char *)base + i * type_size(type);
  switch (type) {
    case 0: return *(const int8_t *)p;
    case 1: return *(const uint8_t *)p;
    case 2: return *(const int32_t *)p;
    case 3: return *(const uint32_t *)p;
    case 4: return (double)*(const int64_t *)p;
    case 5: return (double)*(const uint64_t *)p;
    case 6: return from_half(*(const uint16_t *)p);
    case 7: return *(const float *)p;
    case 8: return *(const double *)p;
    default: {
      uint32_t x = (uint32_t)*(const uint16_t *)p << 16;
      float f;
      memcpy(&f, &x, 4);
      return f;
    }
  }
}

/* ---- collectives: layouts and data (generated/collectives.h: vocabulary.toml's table) ---- */
typedef nb_coll_layout layout_t;

static int rank_, nranks_, op_, type_, root_;

static layout_t layout_of(int coll, size_t bytes, int type, int n) {
  return nb_coll_layout_of(coll, bytes / type_size(type), (size_t)n);
}

static double value(long rank, size_t index, int rep) {
  if (op_ == 1) return ((index + (size_t)rank + (size_t)rep) % (size_t)nranks_ == 0) + 1;
  return (double)((index + 3 * (size_t)rank + (size_t)rep) % 7 + 1);
}

static double reduced(size_t index, int rep) {
  double acc = value(0, index, rep);
  for (int r = 1; r < nranks_; ++r) {
    double v = value(r, index, rep);
    acc = op_ == 1 ? acc * v : op_ == 2 ? fmax(acc, v) : op_ == 3 ? fmin(acc, v) : acc + v;
  }
  return op_ == 4 ? acc / nranks_ : acc;
}

/* What this rank holds at recv[i] afterwards; returns 0 where nothing is defined. */
static int expected(int coll, layout_t l, size_t i, int rep, double *want) {
  return nb_coll_received(coll, i, l.count, (size_t)nranks_, (size_t)rank_, (size_t)root_, rep, value, reduced, want);
}

static void tolerance(double *abs_tol, double *rel_tol) {
  *abs_tol = *rel_tol = 0;
  if (op_ == 4) nb_coll_avg_tolerance(type_, abs_tol, rel_tol); /* avg: vocabulary.toml's avg_tolerance */
}

/* ---- memory: device (or host, for a stand-in) ------------------------------------------ */
static int register_mode;
static nb_ncclComm_t comm;
static void *stream;
static void *registrations[16];
static int registered_windows[16], nregistrations;

static void *alloc_buffer(size_t bytes) {
  void *p = NULL;
  bytes = bytes ? bytes : 1;
  if (register_mode) {
    if (host_memory) p = calloc(1, bytes);
    else nccl_check("ncclMemAlloc", nb_ncclMemAlloc(&p, bytes));
    if (!p) die("alloc", "out of memory");
    void *handle = NULL;
    if (register_mode == 1) {
      nccl_check("ncclCommRegister", nb_ncclCommRegister(comm, p, bytes, &handle));
    } else {
      nb_ncclWindow_t win;
      nccl_check("ncclCommWindowRegister",
                 nb_ncclCommWindowRegister(comm, p, bytes, &win, NB_NCCL_WIN_COLL_SYMMETRIC));
      handle = (void *)win;
    }
    registered_windows[nregistrations] = register_mode == 2;
    registrations[nregistrations++] = handle;
    return p;
  }
  if (host_memory) {
    p = calloc(1, bytes);
    if (!p) die("calloc", "out of memory");
  } else {
    cuda_check("cudaMalloc", cuda.malloc(&p, bytes));
  }
  return p;
}

static void copy_in(void *device, const void *host, size_t bytes) {
  if (host_memory) memcpy(device, host, bytes);
  else cuda_check("cudaMemcpy", cuda.memcpy(device, host, bytes, 1));
}
static void copy_out(void *host, const void *device, size_t bytes) {
  if (host_memory) memcpy(host, device, bytes);
  else cuda_check("cudaMemcpy", cuda.memcpy(host, device, bytes, 2));
}
static void zero(void *device, size_t bytes) {
  if (host_memory) memset(device, 0, bytes);
  else cuda_check("cudaMemset", cuda.memset(device, 0, bytes));
}
static void sync_stream(void) {
  if (!host_memory) cuda_check("cudaStreamSynchronize", cuda.stream_synchronize(stream));
}

/* ---- one call ------------------------------------------------------------------------ */
static void run(int coll, void *send, void *recv, layout_t l) {
  nb_ncclDataType_t t = (nb_ncclDataType_t)type_;
  nb_ncclRedOp_t op = (nb_ncclRedOp_t)op_;
  switch (coll) {
    case NB_COLL_ALL_REDUCE: nccl_check("ncclAllReduce", nb_ncclAllReduce(send, recv, l.count, t, op, comm, stream)); break;
    case NB_COLL_ALL_GATHER: nccl_check("ncclAllGather", nb_ncclAllGather(send, recv, l.count, t, comm, stream)); break;
    case NB_COLL_REDUCE_SCATTER:
      nccl_check("ncclReduceScatter", nb_ncclReduceScatter(send, recv, l.count, t, op, comm, stream));
      break;
    case NB_COLL_BROADCAST: nccl_check("ncclBroadcast", nb_ncclBroadcast(send, recv, l.count, t, root_, comm, stream)); break;
    case NB_COLL_REDUCE: nccl_check("ncclReduce", nb_ncclReduce(send, recv, l.count, t, op, root_, comm, stream)); break;
    case NB_COLL_ALL_TO_ALL: nccl_check("ncclAlltoAll", nb_ncclAlltoAll(send, recv, l.count, t, comm, stream)); break;
    default:
      nccl_check("ncclGroupStart", nb_ncclGroupStart());
      nccl_check("ncclSend", nb_ncclSend(send, l.count, t, (rank_ + 1) % nranks_, comm, stream));
      nccl_check("ncclRecv", nb_ncclRecv(recv, l.count, t, (rank_ - 1 + nranks_) % nranks_, comm, stream));
      nccl_check("ncclGroupEnd", nb_ncclGroupEnd());
  }
}

static void *token;
static void barrier(void) {
  nccl_check("ncclAllReduce", nb_ncclAllReduce(token, token, 1, nb_ncclFloat32, nb_ncclSum, comm, stream));
  sync_stream();
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static size_t parse_list(const char *text, long *out, size_t max) {
  size_t n = 0;
  char *copy = strdup(text), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
    out[n++] = strtol(tok, NULL, 10);
  free(copy);
  return n;
}

static int name_index(const char *name, const char *const *names, int n, const char *flag) {
  for (int i = 0; i < n; ++i)
    if (!strcmp(name, names[i])) return i;
  die(flag, name);
  return -1;
}

static void share_unique_id(const char *path, nb_ncclUniqueId *id) {
  if (rank_ == 0) {
    char tmp[4096];
    nccl_check("ncclGetUniqueId", nb_ncclGetUniqueId(id));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
      die("--uid-file", path);
    return;
  }
  for (int waited = 0;; ++waited) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) return;
    }
    if (waited > 30000) die("--uid-file", "rank 0 wrote no unique id in 300 s");
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
}

typedef struct {
  int coll;
  layout_t l;
  char *sendbuf, *recvbuf, *send, *recv, *host;
  size_t send_elems, buffer_elems;
} placement_t;

/* Poison both buffers (0 is no expected value: every value is >= 1), then this rank's data. */
static void fill(const placement_t *p, int rep) {
  size_t es = type_size(type_);
  zero(p->recvbuf, p->buffer_elems * es);
  if (p->send == p->sendbuf) zero(p->sendbuf, p->send_elems * es);
  /* Threads (OpenMP, when built with -fopenmp): a GiB of values is a second on one core. */
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < p->l.send; ++i) store(type_, p->host, i, value(rank_, i, rep));
  copy_in(p->send, p->host, p->l.send * es);
  /* cudaMemset and a pageable cudaMemcpy run on the legacy stream, which the worker's
   * non-blocking stream does not wait for (and the copy may return before its DMA lands). */
  if (!host_memory) cuda_check("cudaDeviceSynchronize", cuda.device_synchronize());
}

static long count_wrong(const placement_t *p, int rep) {
  double abs_tol, rel_tol, want;
  long wrong = 0;
  tolerance(&abs_tol, &rel_tol);
  if (!p->l.recv || !expected(p->coll, p->l, 0, rep, &want)) return 0; /* nothing defined on this rank */
  copy_out(p->host, p->recv, p->l.recv * type_size(type_));
#pragma omp parallel for schedule(static) reduction(+ : wrong)
  for (size_t i = 0; i < p->l.recv; ++i) {
    double w;
    expected(p->coll, p->l, i, rep, &w);
    double got = load(type_, p->host, i);
    if (isnan(got) || fabs(got - w) > abs_tol + rel_tol * fabs(w)) ++wrong;
  }
  return wrong;
}

static void run_collective(int coll, long *sizes, long *iters, size_t nsizes, long warm_max, long warm_min,
                           int check, int blocking) {
  size_t es = type_size(type_), max_send = 0, max_recv = 0;
  for (size_t s = 0; s < nsizes; ++s) {
    layout_t l = layout_of(coll, (size_t)sizes[s], type_, nranks_);
    if (l.send > max_send) max_send = l.send;
    if (l.recv > max_recv) max_recv = l.recv;
  }
  placement_t p = {.coll = coll, .send_elems = max_send, .buffer_elems = max_send > max_recv ? max_send : max_recv};
  p.sendbuf = alloc_buffer(p.send_elems * es);
  p.recvbuf = alloc_buffer(p.buffer_elems * es);
  p.host = malloc((p.buffer_elems ? p.buffer_elems : 1) * es);
  if (!p.host) die("malloc", "out of memory");

  /* nccl-tests warms up once per test, out of place, at the largest and the smallest size. */
  layout_t last = layout_of(coll, (size_t)sizes[nsizes - 1], type_, nranks_);
  layout_t first = layout_of(coll, (size_t)sizes[0], type_, nranks_);
  for (long i = 0; last.count && i < warm_max; ++i) run(coll, p.sendbuf, p.recvbuf, last);
  for (long i = 0; first.count && i < warm_min; ++i) run(coll, p.sendbuf, p.recvbuf, first);
  sync_stream();

  for (size_t s = 0; s < nsizes; ++s) {
    p.l = layout_of(coll, (size_t)sizes[s], type_, nranks_);
    if (!p.l.count) continue;
    for (int in_place = 0; in_place < 2; ++in_place) {
      p.send = in_place ? p.recvbuf + p.l.send_in_place * (size_t)rank_ * es : p.sendbuf;
      p.recv = in_place ? p.recvbuf + p.l.recv_in_place * (size_t)rank_ * es : p.recvbuf;
      if (check) fill(&p, 0);
      run(coll, p.send, p.recv, p.l);
      sync_stream();
      barrier();
      double t0 = now_us();
      for (long it = 0; it < iters[s]; ++it) {
        run(coll, p.send, p.recv, p.l);
        if (blocking) {
          sync_stream();
          barrier();
        }
      }
      sync_stream();
      double time_us = (now_us() - t0) / (double)iters[s];
      char wrong_text[32] = "null";
      if (check && !(in_place && !nb_coll_in_place_checked[coll])) {
        long wrong = 0;
        for (int rep = 1; rep <= check && !wrong; ++rep) {
          fill(&p, rep);
          run(coll, p.send, p.recv, p.l);
          sync_stream();
          wrong += count_wrong(&p, rep);
        }
        snprintf(wrong_text, sizeof wrong_text, "%ld", wrong);
      }
      printf("{\"event\": \"result\", \"collective\": \"%s\", \"size\": %zu, \"count\": %zu, \"in_place\": %d, "
             "\"time_us\": %.6f, \"wrong\": %s, \"iters\": %ld}\n",
             nb_coll_names[coll], (p.l.send > p.l.recv ? p.l.send : p.l.recv) * es, p.l.count, in_place, time_us,
             wrong_text, iters[s]);
      fflush(stdout);
    }
  }
  free(p.host);
  if (!register_mode) { /* registered buffers stay until their deregistration at the end */
    if (host_memory) {
      free(p.sendbuf);
      free(p.recvbuf);
    } else {
      cuda_check("cudaFree", cuda.free(p.sendbuf));
      cuda_check("cudaFree", cuda.free(p.recvbuf));
    }
  }
}

int main(int argc, char **argv) {
  static struct option options[] = {
      {"backend", required_argument, 0, 'B'}, {"rank", required_argument, 0, 'r'},
      {"nranks", required_argument, 0, 'n'},  {"device", required_argument, 0, 'D'},
      {"uid-file", required_argument, 0, 'u'}, {"collectives", required_argument, 0, 'C'},
      {"sizes", required_argument, 0, 's'},   {"iters", required_argument, 0, 'i'},
      {"warmups", required_argument, 0, 'w'}, {"dtype", required_argument, 0, 'd'},
      {"op", required_argument, 0, 'o'},      {"root", required_argument, 0, 'R'},
      {"check", required_argument, 0, 'c'},   {"blocking", required_argument, 0, 'z'},
      {"register", required_argument, 0, 'g'}, {"host-memory", no_argument, 0, 'H'},
      {0, 0, 0, 0}};
  const char *uid_file = NULL, *collectives = NULL, *sizes_text = NULL, *iters_text = NULL, *warmups_text = "0,0";
  int device = 0, check = 0, blocking = 0, opt;
  while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (opt) {
      case 'B': break;
      case 'r': rank_ = atoi(optarg); break;
      case 'n': nranks_ = atoi(optarg); break;
      case 'D': device = atoi(optarg); break;
      case 'u': uid_file = optarg; break;
      case 'C': collectives = optarg; break;
      case 's': sizes_text = optarg; break;
      case 'i': iters_text = optarg; break;
      case 'w': warmups_text = optarg; break;
      case 'd': type_ = dtype_index(optarg); break;
      case 'o': op_ = name_index(optarg, nb_coll_op_names, NB_COLL_OP_COUNT, "--op"); break;
      case 'R': root_ = atoi(optarg); break;
      case 'c': check = atoi(optarg); break;
      case 'z': blocking = atoi(optarg); break;
      case 'g': register_mode = atoi(optarg); break;
      case 'H': host_memory = 1; break;
      default: die("arguments", "see bindings/python/ncclbind/bench/worker.py");
    }
  }
  if (!uid_file || !collectives || !sizes_text || !iters_text || nranks_ < 1 || rank_ < 0 || rank_ >= nranks_)
    die("arguments", "--rank, --nranks, --uid-file, --collectives, --sizes and --iters are required");
  long sizes[256], iters[256], warmups[2] = {0, 0};
  size_t nsizes = parse_list(sizes_text, sizes, 256);
  if (parse_list(iters_text, iters, 256) != nsizes || nsizes == 0) die("--iters", "one per size");
  parse_list(warmups_text, warmups, 2);

  if (!host_memory) {
    load_cuda();
    cuda_check("cudaSetDevice", cuda.set_device(device));
    cuda_check("cudaStreamCreateWithFlags", cuda.stream_create(&stream, 1 /* cudaStreamNonBlocking */));
  }
  nb_ncclUniqueId id;
  share_unique_id(uid_file, &id);
  nccl_check("ncclCommInitRank", nb_ncclCommInitRank(&comm, nranks_, id, rank_));
  char name[256], host[256] = "?";
  int bus;
  device_name(device, name, sizeof name, &bus);
  gethostname(host, sizeof host);
  printf("{\"event\": \"ready\", \"rank\": %d, \"pid\": %d, \"host\": \"%s\", \"device\": %d, \"pci_bus\": %d, "
         "\"device_name\": \"%s\", \"notes\": []}\n",
         rank_, (int)getpid(), host, device, bus, name);
  fflush(stdout);
  token = host_memory ? calloc(1, 4) : NULL;
  if (!host_memory) {
    cuda_check("cudaMalloc", cuda.malloc(&token, 4));
    zero(token, 4);
  }

  char *copy = strdup(collectives), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    run_collective(name_index(tok, nb_coll_names, NB_COLL_COUNT, "--collectives"), sizes, iters, nsizes, warmups[0],
                   warmups[1], check, blocking);
  free(copy);
  sync_stream();
  for (int i = nregistrations - 1; i >= 0; --i) {
    if (registered_windows[i])
      nccl_check("ncclCommWindowDeregister", nb_ncclCommWindowDeregister(comm, (nb_ncclWindow_t)registrations[i]));
    else
      nccl_check("ncclCommDeregister", nb_ncclCommDeregister(comm, registrations[i]));
  }
  nccl_check("ncclCommDestroy", nb_ncclCommDestroy(comm));
  printf("{\"event\": \"done\"}\n");
  return 0;
}
