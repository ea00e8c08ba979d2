/* Cost per call of whatever stands in front of libnccl (nothing, or the shim in a mode):
 * ncclGetVersion (a trivial call) and a 2-float ncclAllReduce (out of place and in place)
 * on a one-rank communicator, best of 5 rounds of N calls. run.sh / run_gpu.sh run it
 * without the shim and under it in each mode and print one table.
 *   bench_calls [--gpu] [N]      --gpu: device buffers and a stream (CUDA runtime via dlopen)
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

static void sync_stream(void) {
  if (stream_sync) stream_sync(stream);
}

int main(int argc, char **argv) {
  int gpu = 0;
  long n = 200000;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--gpu"))
      gpu = 1;
    else
      n = atol(argv[i]);
  }
  float host_send[2] = {1, 2}, host_recv[2];
  void *send = host_send, *recv = host_recv;
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
  void *comm;
  if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0)) return fprintf(stderr, "comm init failed\n"), 2;
  const char *names[] = {"get_version", "all_reduce", "all_reduce_in_place"};
  for (int which = 0; which < 3; ++which) {
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      int version;
      double t0 = now();
      for (long i = 0; i < n; ++i) {
        if (which == 0)
          ncclGetVersion(&version);
        else if (which == 1)
          ncclAllReduce(send, recv, 2, 7, 0, comm, stream);
        else
          ncclAllReduce(recv, recv, 2, 7, 0, comm, stream);
        if (gpu && which && (i & 1023) == 1023) sync_stream(); /* keep NCCL's queue bounded */
      }
      sync_stream();
      double per = (now() - t0) / n;
      if (per < best) best = per;
    }
    printf("%s %.1f\n", names[which], best);
  }
  ncclCommDestroy(comm);
  return 0;
}
