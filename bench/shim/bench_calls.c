/* Cost per call of whatever stands in front of libnccl (nothing, or the shim in a mode):
 * ncclGetVersion (a trivial call) and a 2-float ncclAllReduce (out of place and in place) on a
 * one-rank communicator. After one warm-up batch of each, it times B batches of N calls of
 * each call in turn (the three interleaved, so a slow stretch of the machine hits all three)
 * and prints each call's median over the batches. compare_modes.py runs it once per mode and
 * round (run.sh / run_gpu.sh).
 *   bench_calls [--gpu] [--batches B] [N]   --gpu: device buffers and a stream (CUDA runtime
 *                                           via dlopen); B: 5; N: 200000 (--gpu: at most 20000)
 * prints "get_version NS", "all_reduce NS", "all_reduce_in_place NS" (ns per call). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  char internal[128];
} unique_id;
int ncclGetVersion(int *version);
int ncclGetUniqueId(unique_id *id);
int ncclCommInitRank(void **comm, int nranks, unique_id id, int rank);
int ncclCommDestroy(void *comm);
int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream);

enum { GET_VERSION, ALL_REDUCE, ALL_REDUCE_IN_PLACE, KINDS };
static const char *const names[KINDS] = {"get_version", "all_reduce", "all_reduce_in_place"};
#define MAX_BATCHES 101

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef int (*cuda_malloc_fn)(void **, size_t);
typedef int (*cuda_stream_create_fn)(void **);
typedef int (*cuda_stream_sync_fn)(void *);
static cuda_stream_sync_fn stream_sync;
static void *stream;
static int gpu;
static void *comm, *send, *recv;

static void sync_stream(void) {
  if (stream_sync) stream_sync(stream);
}

/* ns per call over n calls of one kind. */
static double batch(int kind, long n) {
  int version;
  const double t0 = now();
  for (long i = 0; i < n; ++i) {
    if (kind == GET_VERSION)
      ncclGetVersion(&version);
    else if (kind == ALL_REDUCE)
      ncclAllReduce(send, recv, 2, 7, 0, comm, stream);
    else
      ncclAllReduce(recv, recv, 2, 7, 0, comm, stream);
    if (gpu && kind != GET_VERSION && (i & 1023) == 1023) sync_stream(); /* keep NCCL's queue bounded */
  }
  sync_stream();
  return (now() - t0) / n;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long n = 200000;
  int batches = 5;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--gpu"))
      gpu = 1;
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc)
      batches = atoi(argv[++i]);
    else
      n = atol(argv[i]);
  }
  if (n < 1 || batches < 1 || batches > MAX_BATCHES)
    return fprintf(stderr, "bench_calls: N must be >= 1 and --batches 1..%d\n", MAX_BATCHES), 2;
  float host_send[2] = {1, 2}, host_recv[2];
  send = host_send;
  recv = host_recv;
  if (gpu) {
    void *cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!cudart) cudart = dlopen("libcudart.so.12", RTLD_NOW | RTLD_GLOBAL);
    if (!cudart) cudart = dlopen("libcudart.so", RTLD_NOW | RTLD_GLOBAL);
    if (!cudart) return fprintf(stderr, "no libcudart: %s\n", dlerror()), 2;
    cuda_malloc_fn cuda_malloc = (cuda_malloc_fn)dlsym(cudart, "cudaMalloc");
    cuda_stream_create_fn stream_create = (cuda_stream_create_fn)dlsym(cudart, "cudaStreamCreate");
    stream_sync = (cuda_stream_sync_fn)dlsym(cudart, "cudaStreamSynchronize");
    if (cuda_malloc(&send, 64) || cuda_malloc(&recv, 64) || stream_create(&stream))
      return fprintf(stderr, "cudaMalloc/cudaStreamCreate failed\n"), 2;
    if (n > 20000) n = 20000; /* each enqueue is microseconds on a GPU */
  }
  unique_id id;
  if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0)) return fprintf(stderr, "comm init failed\n"), 2;
  for (int kind = 0; kind < KINDS; ++kind) batch(kind, n); /* warm-up: resolution, caches, NCCL's first plans */
  static double per_call[KINDS][MAX_BATCHES];
  for (int b = 0; b < batches; ++b)
    for (int kind = 0; kind < KINDS; ++kind) per_call[kind][b] = batch(kind, n);
  for (int kind = 0; kind < KINDS; ++kind) {
    qsort(per_call[kind], (size_t)batches, sizeof(double), by_value);
    const double median = batches % 2 ? per_call[kind][batches / 2]
                                      : (per_call[kind][batches / 2 - 1] + per_call[kind][batches / 2]) / 2;
    printf("%s %.2f\n", names[kind], median);
  }
  ncclCommDestroy(comm);
  return 0;
}
