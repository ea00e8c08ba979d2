/* The "raw C" row of bench/python/bench_allreduce.py: ncclAllReduce called in
 * a C loop through a plain function pointer, with no binding in between. */
#define _GNU_SOURCE
#include "ncclbind_python.h"

#include <dlfcn.h>
#include <time.h>

int nbpy_cuda_load(void);
int nbpy_cuda_stream_synchronize_loaded(void *stream);

typedef int (*all_reduce_fn)(const void *, void *, size_t, int, int, void *, void *);

PyObject *nbpy_bench_raw_all_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  void *comm, *send, *recv, *stream;
  unsigned long long count, iterations;
  long long datatype;
  if (nargs != 7 && nargs != 8) {
    PyErr_SetString(PyExc_TypeError, "bench_raw_all_reduce(comm, sendbuff, recvbuff, count, datatype, stream, "
                                      "iterations[, synchronize=True])");
    return NULL;
  }
  int synchronize = nargs == 8 ? PyObject_IsTrue(args[7]) : 1;
  if (synchronize < 0) return NULL;
  const char *fn = "bench_raw_all_reduce";
  if (nbpy_arg_pointer(args[0], fn, "comm", &comm) < 0 || nbpy_arg_pointer(args[1], fn, "sendbuff", &send) < 0 ||
      nbpy_arg_pointer(args[2], fn, "recvbuff", &recv) < 0 ||
      nbpy_arg_unsigned(args[3], fn, "count", SIZE_MAX, &count) < 0 ||
      nbpy_arg_signed(args[4], fn, "datatype", 0, 64, &datatype) < 0 ||
      nbpy_arg_pointer(args[5], fn, "stream", &stream) < 0 ||
      nbpy_arg_unsigned(args[6], fn, "iterations", 1ull << 40, &iterations) < 0)
    return NULL;
  ncclbind_library_info info;
  int rc = ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info);
  if (rc != NCCLBIND_OK) return nbpy_raise_result(rc, "ncclAllReduce");
  void *library = dlopen(info.path, RTLD_NOW | RTLD_NOLOAD);
  all_reduce_fn all_reduce = library ? (all_reduce_fn)dlsym(library, "ncclAllReduce") : NULL;
  if (!all_reduce) {
    PyErr_SetString(PyExc_RuntimeError, "ncclAllReduce not found in the loaded libnccl");
    return NULL;
  }
  if (nbpy_cuda_load() < 0) return NULL;
  struct timespec start, end;
  int result = 0, sync = 0;
  Py_BEGIN_ALLOW_THREADS
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned long long i = 0; i < iterations && result == 0; ++i)
    result = all_reduce(send, recv, (size_t)count, (int)datatype, 0 /* ncclSum */, comm, stream);
  if (synchronize) sync = nbpy_cuda_stream_synchronize_loaded(stream);
  clock_gettime(CLOCK_MONOTONIC, &end);
  Py_END_ALLOW_THREADS
  if (result != 0) return nbpy_raise_result(result, "ncclAllReduce");
  if (sync != 0) {
    PyErr_Format(PyExc_RuntimeError, "cudaStreamSynchronize failed (%d)", sync);
    return NULL;
  }
  return PyFloat_FromDouble((double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9);
}
