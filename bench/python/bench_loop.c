/* The "raw C" rows of the binding benchmarks: NCCL's collectives and a send/recv pair
 * called in a C loop through plain function pointers, with no binding in between, and NCCL
 * EP's dispatch and combine called the same way (raw_ep_pair). A module of its own
 * (ncclbind_bench_loop), built by bench/python/raw_loop.py for the benchmarks only; the
 * production extension ncclbind._nccl does not carry it. */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ncclbind/nccl_ep.h> /* the generated declarations: raw_ep_pair's function types */

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef int (*op_fn)(const void *, void *, size_t, int, int, void *, void *);          /* AllReduce, ReduceScatter */
typedef int (*reduce_fn)(const void *, void *, size_t, int, int, int, void *, void *); /* Reduce */
typedef int (*rooted_fn)(const void *, void *, size_t, int, int, void *, void *);      /* Broadcast, Gather, Scatter */
typedef int (*plain_fn)(const void *, void *, size_t, int, void *, void *);            /* AllGather, AlltoAll */
typedef int (*send_fn)(const void *, size_t, int, int, void *, void *);
typedef int (*recv_fn)(void *, size_t, int, int, void *, void *);
typedef int (*group_fn)(void);
typedef int (*stream_synchronize_fn)(void *);

enum shape { OP, REDUCE, ROOTED, PLAIN, SEND_RECV };

static const struct {
  const char *name, *function;
  enum shape shape;
} collectives[] = {
    {"all_reduce", "ncclAllReduce", OP},    {"reduce_scatter", "ncclReduceScatter", OP},
    {"reduce", "ncclReduce", REDUCE},       {"broadcast", "ncclBroadcast", ROOTED},
    {"gather", "ncclGather", ROOTED},       {"scatter", "ncclScatter", ROOTED},
    {"all_gather", "ncclAllGather", PLAIN}, {"all_to_all", "ncclAlltoAll", PLAIN},
    {"send_recv", "ncclSend", SEND_RECV},
};

/* The driver API's cuStreamSynchronize takes a runtime stream as it is (the same handle). */
static stream_synchronize_fn find_stream_synchronize(void) {
  static stream_synchronize_fn found;
  if (!found) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    found = cuda ? (stream_synchronize_fn)dlsym(cuda, "cuStreamSynchronize") : NULL;
    if (!found) PyErr_SetString(PyExc_RuntimeError, "cuStreamSynchronize: libcuda.so.1 not found");
  }
  return found;
}

static double seconds_between(const struct timespec *start, const struct timespec *end) {
  return (double)(end->tv_sec - start->tv_sec) + (double)(end->tv_nsec - start->tv_nsec) * 1e-9;
}

static void *find(void *library, const char *path, const char *function) {
  void *f = library ? dlsym(library, function) : NULL;
  if (!f)
    PyErr_Format(PyExc_RuntimeError, "%s: not in %s, or that library is not loaded in this process", function, path);
  return f;
}

#define USAGE                                                                                                \
  "raw_collective(library_path, collective, comm, sendbuff, recvbuff, count, datatype, stream, iterations, " \
  "synchronize, op=0, root=0, send_peer=0, recv_peer=0, /)"

/* synchronize: 0 never, 1 once after the loop, 2 after every call (all timed). */
static PyObject *raw_collective(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs < 10 || nargs > 14) {
    PyErr_SetString(PyExc_TypeError, USAGE);
    return NULL;
  }
  const char *path = PyUnicode_AsUTF8(args[0]), *name = PyUnicode_AsUTF8(args[1]);
  void *comm = PyLong_AsVoidPtr(args[2]), *send = PyLong_AsVoidPtr(args[3]), *recv = PyLong_AsVoidPtr(args[4]);
  size_t count = (size_t)PyLong_AsUnsignedLongLong(args[5]);
  int datatype = (int)PyLong_AsLong(args[6]);
  void *stream = PyLong_AsVoidPtr(args[7]);
  unsigned long long iterations = PyLong_AsUnsignedLongLong(args[8]);
  long synchronize = PyLong_AsLong(args[9]);
  int extra[4] = {0, 0, 0, 0}; /* op, root, send_peer, recv_peer */
  for (Py_ssize_t i = 10; i < nargs; ++i) extra[i - 10] = (int)PyLong_AsLong(args[i]);
  if (!path || !name || PyErr_Occurred()) return NULL;
  int which = -1;
  for (size_t i = 0; i < sizeof collectives / sizeof collectives[0]; ++i)
    if (strcmp(name, collectives[i].name) == 0) which = (int)i;
  if (which < 0) {
    PyErr_Format(PyExc_ValueError, "raw_collective: unknown collective %s", name);
    return NULL;
  }
  /* The libnccl ncclbind loaded (the communicator came from it), already in the process. */
  void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  void *f = find(library, path, collectives[which].function);
  recv_fn recv_f = NULL;
  group_fn group_start = NULL, group_end = NULL;
  if (f && collectives[which].shape == SEND_RECV) {
    recv_f = (recv_fn)find(library, path, "ncclRecv");
    group_start = (group_fn)find(library, path, "ncclGroupStart");
    group_end = (group_fn)find(library, path, "ncclGroupEnd");
  }
  stream_synchronize_fn stream_synchronize = synchronize ? find_stream_synchronize() : NULL;
  if (library) dlclose(library); /* RTLD_NOLOAD took a reference; ncclbind keeps its own */
  if (PyErr_Occurred()) return NULL;
  const enum shape shape = collectives[which].shape;
  const int op = extra[0], root = extra[1], send_peer = extra[2], recv_peer = extra[3];
  struct timespec start, end;
  int result = 0, sync = 0;
  Py_BEGIN_ALLOW_THREADS
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned long long i = 0; i < iterations && result == 0 && sync == 0; ++i) {
    switch (shape) {
      case OP:
        result = ((op_fn)f)(send, recv, count, datatype, op, comm, stream);
        break;
      case REDUCE:
        result = ((reduce_fn)f)(send, recv, count, datatype, op, root, comm, stream);
        break;
      case ROOTED:
        result = ((rooted_fn)f)(send, recv, count, datatype, root, comm, stream);
        break;
      case PLAIN:
        result = ((plain_fn)f)(send, recv, count, datatype, comm, stream);
        break;
      case SEND_RECV:
        result = group_start();
        if (result == 0) result = ((send_fn)f)(send, count, datatype, send_peer, comm, stream);
        if (result == 0) result = recv_f(recv, count, datatype, recv_peer, comm, stream);
        if (result == 0) result = group_end();
        break;
    }
    if (synchronize == 2) sync = stream_synchronize(stream);
  }
  if (synchronize == 1 && result == 0) sync = stream_synchronize(stream);
  clock_gettime(CLOCK_MONOTONIC, &end);
  Py_END_ALLOW_THREADS
  if (result != 0) {
    PyErr_Format(PyExc_RuntimeError, "%s failed (ncclResult_t %d)", collectives[which].function, result);
    return NULL;
  }
  if (sync != 0) {
    PyErr_Format(PyExc_RuntimeError, "cuStreamSynchronize failed (%d)", sync);
    return NULL;
  }
  return PyFloat_FromDouble(seconds_between(&start, &end));
}

/* The all-reduce loop of the first benchmarks (sum; synchronize: a bool, default True). */
static PyObject *raw_all_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 8 && nargs != 9) {
    PyErr_SetString(PyExc_TypeError,
                    "raw_all_reduce(library_path, comm, sendbuff, recvbuff, count, datatype, "
                    "stream, iterations[, synchronize=True])");
    return NULL;
  }
  int synchronize = nargs == 9 ? PyObject_IsTrue(args[8]) : 1;
  if (synchronize < 0) return NULL;
  PyObject *name = PyUnicode_FromString("all_reduce"), *sync = PyLong_FromLong(synchronize);
  PyObject *full[10] = {args[0], name, args[1], args[2], args[3], args[4], args[5], args[6], args[7], sync};
  PyObject *seconds = name && sync ? raw_collective(self, full, 10) : NULL;
  Py_XDECREF(name);
  Py_XDECREF(sync);
  return seconds;
}

/* NCCL EP's own functions have the generated wrappers' types (both come from nccl_ep.h). */
typedef __typeof__(nb_ncclEpDispatch) ep_dispatch_fn;
typedef __typeof__(nb_ncclEpCombine) ep_combine_fn;

#define EP_USAGE                                                                                     \
  "raw_ep_pair(library_path, handle, dispatch_inputs, dispatch_outputs, layout_info, combine_inputs, " \
  "combine_outputs, stream, synchronize, /)"

/* One ncclEpDispatch, then one ncclEpCombine (no configs), of the libnccl_ep at library_path (the
 * copy ncclbind loaded), each timed from the call to the end of cuStreamSynchronize(stream), as
 * the benchmarks time every layer; synchronize 0 leaves the synchronize out (a CPU stand-in).
 * Returns (dispatch seconds, combine seconds); a failed call raises naming it and its result. */
static PyObject *raw_ep_pair(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 9) {
    PyErr_SetString(PyExc_TypeError, EP_USAGE);
    return NULL;
  }
  const char *path = PyUnicode_AsUTF8(args[0]);
  void *pointers[7];
  for (int i = 0; i < 7; ++i) pointers[i] = PyLong_AsVoidPtr(args[i + 1]);
  int synchronize = PyObject_IsTrue(args[8]);
  if (!path || synchronize < 0 || PyErr_Occurred()) return NULL;
  void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  ep_dispatch_fn *dispatch = (ep_dispatch_fn *)find(library, path, "ncclEpDispatch");
  ep_combine_fn *combine = dispatch ? (ep_combine_fn *)find(library, path, "ncclEpCombine") : NULL;
  if (library) dlclose(library); /* RTLD_NOLOAD took a reference; ncclbind keeps its own */
  if (!combine) return NULL;
  stream_synchronize_fn sync = synchronize ? find_stream_synchronize() : NULL;
  if (synchronize && !sync) return NULL;
  void *stream = pointers[6];
  struct timespec t0, t1, t2;
  int dispatched = 0, combined = 0, synced = 0;
  Py_BEGIN_ALLOW_THREADS
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dispatched = dispatch((nb_ncclEpHandle_t)pointers[0], pointers[1], pointers[2], pointers[3], NULL, stream);
  if (dispatched == 0 && sync) synced = sync(stream);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (dispatched == 0 && synced == 0) {
    combined = combine((nb_ncclEpHandle_t)pointers[0], pointers[4], pointers[5], NULL, stream);
    if (combined == 0 && sync) synced = sync(stream);
  }
  clock_gettime(CLOCK_MONOTONIC, &t2);
  Py_END_ALLOW_THREADS
  if (dispatched != 0) return PyErr_Format(PyExc_RuntimeError, "ncclEpDispatch failed (%d)", dispatched);
  if (combined != 0) return PyErr_Format(PyExc_RuntimeError, "ncclEpCombine failed (%d)", combined);
  if (synced != 0) return PyErr_Format(PyExc_RuntimeError, "cuStreamSynchronize failed (%d)", synced);
  return Py_BuildValue("(dd)", seconds_between(&t0, &t1), seconds_between(&t1, &t2));
}

/* One cuStreamSynchronize, for Python rows that synchronize the way the raw loop does. */
static PyObject *stream_synchronize(PyObject *self, PyObject *stream) {
  (void)self;
  void *handle = PyLong_AsVoidPtr(stream);
  if (PyErr_Occurred()) return NULL;
  stream_synchronize_fn f = find_stream_synchronize();
  if (!f) return NULL;
  int result;
  Py_BEGIN_ALLOW_THREADS
  result = f(handle);
  Py_END_ALLOW_THREADS
  if (result != 0) return PyErr_Format(PyExc_RuntimeError, "cuStreamSynchronize failed (%d)", result);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"raw_collective", (PyCFunction)(void (*)(void))raw_collective, METH_FASTCALL,
     USAGE "\n--\n\nThe collective (all_reduce, reduce_scatter, reduce, broadcast, gather, scatter, all_gather, "
           "all_to_all, or send_recv: ncclGroupStart, ncclSend to send_peer, ncclRecv from recv_peer, "
           "ncclGroupEnd) `iterations` times from a C loop; seconds taken. synchronize: 0 never, 1 once after "
           "the loop, 2 after every call (cuStreamSynchronize)."},
    {"raw_all_reduce", (PyCFunction)(void (*)(void))raw_all_reduce, METH_FASTCALL,
     "raw_all_reduce(library_path, comm, sendbuff, recvbuff, count, datatype, stream, iterations, synchronize=True, /)\n"
     "--\n\nncclAllReduce (sum) `iterations` times from a C loop; seconds taken, stream synchronized "
     "unless synchronize is False."},
    {"raw_ep_pair", (PyCFunction)(void (*)(void))raw_ep_pair, METH_FASTCALL,
     EP_USAGE "\n--\n\nOne ncclEpDispatch then one ncclEpCombine from C through plain function pointers, each "
              "timed to the end of cuStreamSynchronize (unless synchronize is false): (dispatch s, combine s)."},
    {"stream_synchronize", stream_synchronize, METH_O,
     "stream_synchronize(stream, /)\n--\n\ncuStreamSynchronize(stream), the raw loop's synchronize."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ncclbind_bench_loop", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_ncclbind_bench_loop(void) {
  return PyModule_Create(&module);
}
