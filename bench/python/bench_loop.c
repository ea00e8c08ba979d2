/* The "raw C" row of the all-reduce benchmarks: ncclAllReduce called in a C loop
 * through a plain function pointer, with no binding in between. A module of its
 * own (ncclbind_bench_loop), built by bench/python/raw_loop.py for the benchmarks
 * only; the production extension ncclbind._nccl does not carry it. */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <time.h>

typedef int (*all_reduce_fn)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*stream_synchronize_fn)(void *);


static PyObject *raw_all_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 8 && nargs != 9) {
    PyErr_SetString(PyExc_TypeError, "raw_all_reduce(library_path, comm, sendbuff, recvbuff, count, datatype, "
                                     "stream, iterations[, synchronize=True])");
    return NULL;
  }
  const char *path = PyUnicode_AsUTF8(args[0]);
  void *comm = PyLong_AsVoidPtr(args[1]), *send = PyLong_AsVoidPtr(args[2]), *recv = PyLong_AsVoidPtr(args[3]);
  unsigned long long count = PyLong_AsUnsignedLongLong(args[4]);
  long datatype = PyLong_AsLong(args[5]);
  void *stream = PyLong_AsVoidPtr(args[6]);
  unsigned long long iterations = PyLong_AsUnsignedLongLong(args[7]);
  int synchronize = nargs == 9 ? PyObject_IsTrue(args[8]) : 1;
  if (PyErr_Occurred() || synchronize < 0) return NULL;
  /* The libnccl ncclbind loaded (the communicator came from it), already in the process. */
  void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  all_reduce_fn all_reduce = library ? (all_reduce_fn)dlsym(library, "ncclAllReduce") : NULL;
  if (!all_reduce) {
    PyErr_Format(PyExc_RuntimeError, "ncclAllReduce: %s is not loaded in this process", path);
    return NULL;
  }
  /* The driver API's cuStreamSynchronize takes a runtime stream as it is (the same handle). */
  stream_synchronize_fn stream_synchronize = NULL;
  if (synchronize) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    stream_synchronize = cuda ? (stream_synchronize_fn)dlsym(cuda, "cuStreamSynchronize") : NULL;
    if (!stream_synchronize) {
      PyErr_SetString(PyExc_RuntimeError, "cuStreamSynchronize: libcuda.so.1 not found");
      return NULL;
    }
  }
  struct timespec start, end;
  int result = 0, sync = 0;
  Py_BEGIN_ALLOW_THREADS
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned long long i = 0; i < iterations && result == 0; ++i)
    result = all_reduce(send, recv, (size_t)count, (int)datatype, 0 /* ncclSum */, comm, stream);
  if (synchronize) sync = stream_synchronize(stream);
  clock_gettime(CLOCK_MONOTONIC, &end);
  Py_END_ALLOW_THREADS
  if (result != 0) {
    PyErr_Format(PyExc_RuntimeError, "ncclAllReduce failed (ncclResult_t %d)", result);
    return NULL;
  }
  if (sync != 0) {
    PyErr_Format(PyExc_RuntimeError, "cuStreamSynchronize failed (%d)", sync);
    return NULL;
  }
  return PyFloat_FromDouble((double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9);
}

static PyMethodDef methods[] = {
    {"raw_all_reduce", (PyCFunction)(void (*)(void))raw_all_reduce, METH_FASTCALL,
     "raw_all_reduce(library_path, comm, sendbuff, recvbuff, count, datatype, stream, iterations, synchronize=True, /)\n"
     "--\n\nncclAllReduce (sum) `iterations` times from a C loop; seconds taken, stream synchronized "
     "unless synchronize is False."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ncclbind_bench_loop", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_ncclbind_bench_loop(void) { return PyModule_Create(&module); }
