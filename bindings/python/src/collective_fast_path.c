/* The fast path of Communicator.all_reduce (ncclbind/core/communicator.py).
 * When both buffers are ones buffer.py has already resolved (buffer_cache.h)
 * and pass every check the Python path makes, the call is made here as the
 * generated all_reduce makes it: the same argument conversions and errors,
 * the GIL released around ncclAllReduce. Otherwise it returns False having
 * done nothing, and the caller takes its Python path, which resolves, checks
 * and raises: no rejection is decided here. */
#include "buffer_cache.h"

#include <ncclbind/nccl.h>

static PyObject *red_op_type;   /* ncclbind.nccl_enums.NcclRedOp: its members need no Communicator._op */
static PyObject *stream_handle; /* ncclbind.core.streams.stream_handle, for streams that are not ints */
static PyObject *s_op;

static PyObject *import_attribute(const char *module, const char *name) {
  PyObject *m = PyImport_ImportModule(module);
  if (!m) return NULL;
  PyObject *attribute = PyObject_GetAttrString(m, name);
  Py_DECREF(m);
  return attribute;
}

/* Imported at the first call, as errors.c imports ncclbind.errors. */
static int ready(void) {
  if (stream_handle) return 1;
  if (!s_op && !(s_op = PyUnicode_InternFromString("_op"))) return 0;
  if (!red_op_type && !(red_op_type = import_attribute("ncclbind.nccl_enums", "NcclRedOp"))) return 0;
  stream_handle = import_attribute("ncclbind.core.streams", "stream_handle");
  return stream_handle != NULL;
}

/* 1: the call was made; 0: declined, nothing done; -1: an exception. */
static int fast_path(PyObject *comm, PyObject *handle, PyObject *device_obj, PyObject *sendbuf, PyObject *recvbuf,
                     PyObject *op, PyObject *stream) {
  if (!ready()) return -1;
  /* A destroyed communicator (handle 0): the Python path raises. */
  if (!PyLong_CheckExact(handle) || !PyLong_CheckExact(device_obj) || PyObject_Not(handle)) return 0;
  long device = PyLong_AsLong(device_obj);
  if (device == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }

  int ret = -1;
  PyObject *stream_value = NULL, *op_value = NULL;
  if (stream != Py_None && !PyLong_CheckExact(stream)) {
    stream = stream_value = PyObject_CallOneArg(stream_handle, stream);
    if (!stream) return -1;
  }
  nbpy_known_buffer send, recv;
  int known = nbpy_known_buffer_of(sendbuf, &send);
  if (known <= 0 || (send.has_device && send.device != device)) goto declined;
  if (recvbuf == Py_None || recvbuf == sendbuf) {
    if (send.readonly) goto declined;
    recv = send;
  } else {
    known = nbpy_known_buffer_of(recvbuf, &recv);
    if (known <= 0 || recv.readonly || (recv.has_device && recv.device != device) || recv.count != send.count ||
        recv.datatype != send.datatype)
      goto declined;
  }
  if (PyLong_CheckExact(op) || Py_IS_TYPE(op, (PyTypeObject *)red_op_type))
    op_value = Py_NewRef(op);
  else if (!(op_value = PyObject_CallMethodObjArgs(comm, s_op, op, send.dtype, NULL)))
    goto done;

  /* From here as the generated all_reduce: nbpy_arg_* with its names, then the call. */
  long long v_op;
  void *a_comm, *a_stream;
  if (nbpy_arg_signed(op_value, "ncclAllReduce", "op", -2147483648LL, 4294967295LL, &v_op) < 0 ||
      nbpy_arg_pointer(handle, "ncclAllReduce", "comm", &a_comm) < 0 ||
      nbpy_arg_pointer(stream, "ncclAllReduce", "stream", &a_stream) < 0)
    goto done;
  nb_ncclResult_t result;
  Py_BEGIN_ALLOW_THREADS
  result = nb_ncclAllReduce((const void *)(uintptr_t)send.ptr, (void *)(uintptr_t)recv.ptr, (size_t)send.count,
                            (nb_ncclDataType_t)send.datatype, (nb_ncclRedOp_t)v_op,
                            (nb_ncclComm_t)(uintptr_t)a_comm, a_stream);
  Py_END_ALLOW_THREADS
  if (result != nb_ncclSuccess && result != nb_ncclInProgress) {
    nbpy_raise_result((int)result, "ncclAllReduce");
    goto done;
  }
  ret = 1;
  goto done;
declined:
  if (known >= 0) ret = 0;
done:
  Py_XDECREF(op_value);
  Py_XDECREF(stream_value);
  return ret;
}

/* _all_reduce_fast_path(comm, handle, device, sendbuf, recvbuf, op, stream) -> bool */
PyObject *nbpy_all_reduce_fast_path(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 7) {
    PyErr_SetString(PyExc_TypeError, "_all_reduce_fast_path(comm, handle, device, sendbuf, recvbuf, op, stream)");
    return NULL;
  }
  int made = fast_path(args[0], args[1], args[2], args[3], args[4], args[5], args[6]);
  return made < 0 ? NULL : PyBool_FromLong(made);
}

/* ---- Communicator.all_reduce itself, as a method descriptor of Communicator ----
 * It saves the Python frame and keyword binding of a Python method. It binds only
 * the common shapes of a call, all_reduce(sendbuf[, recvbuf[, op]][, stream=...])
 * and recvbuf=/op= by keyword; any other call goes, as it came, to the Python
 * definition it replaces (bound to the communicator), which binds (or raises
 * TypeError) as Python does and then does what this does. */
static PyObject *python_all_reduce; /* Communicator.all_reduce as defined in communicator.py */
static PyObject *s_handle, *s_device, *s_resolving, *s_recvbuf, *s_op_keyword, *s_stream, *sum_op;

static PyObject *all_reduce_method(PyObject *comm, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  /* sendbuf, recvbuf, op, stream: the defaults of the Python definition */
  PyObject *bound[4] = {NULL, Py_None, sum_op, Py_None};
  int parsed = nargs >= 1 && nargs <= 3;
  for (Py_ssize_t i = 0; parsed && i < nargs; ++i) bound[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; parsed && k < nkw; ++k) {
    /* A call site's keywords are interned strings: compared by identity (an equal
     * string that is not the interned one just takes the Python definition). */
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t slot = name == s_recvbuf ? 1 : name == s_op_keyword ? 2 : name == s_stream ? 3 : -1;
    /* not given positionally too (a call cannot name a keyword twice) */
    parsed = slot > 0 && slot >= nargs;
    if (parsed) bound[slot] = args[nargs + k];
  }
  if (!parsed) {
    PyObject *method = PyMethod_New(python_all_reduce, comm);
    if (!method) return NULL;
    PyObject *result = PyObject_Vectorcall(method, args, nargs, kwnames);
    Py_DECREF(method);
    return result;
  }
  PyObject *handle = PyObject_GetAttr(comm, s_handle);
  PyObject *device = handle ? PyObject_GetAttr(comm, s_device) : NULL;
  int made = device ? fast_path(comm, handle, device, bound[0], bound[1], bound[2], bound[3]) : -1;
  Py_XDECREF(handle);
  Py_XDECREF(device);
  if (made < 0) return NULL;
  if (made) Py_RETURN_NONE;
  PyObject *call[5] = {comm, bound[0], bound[1], bound[2], bound[3]};
  PyObject *result = PyObject_VectorcallMethod(s_resolving, call, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  if (!result) return NULL;
  Py_DECREF(result);
  Py_RETURN_NONE;
}

static PyMethodDef all_reduce_def = {
    "all_reduce", (PyCFunction)(void (*)(void))all_reduce_method, METH_FASTCALL | METH_KEYWORDS,
    "all_reduce($self, sendbuf, recvbuf=None, op=ncclbind.NcclRedOp.SUM, *, stream=None)\n--\n\n"
    "recvbuf = op over all ranks of sendbuf (recvbuf None or sendbuf: in place)."};

/* _all_reduce_method(Communicator, all_reduce) -> the method descriptor that replaces all_reduce */
PyObject *nbpy_all_reduce_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_all_reduce_method(Communicator: type, all_reduce: function)");
    return NULL;
  }
  if (!ready()) return NULL;
  if (!s_handle) {
    PyObject **names[] = {&s_handle, &s_device, &s_resolving, &s_recvbuf, &s_op_keyword, &s_stream};
    const char *texts[] = {"_handle", "_device", "_all_reduce_resolving", "recvbuf", "op", "stream"};
    for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
      if (!(*names[i] = PyUnicode_InternFromString(texts[i]))) return NULL;
  }
  if (!sum_op && !(sum_op = PyObject_GetAttrString(red_op_type, "SUM"))) return NULL;
  Py_XSETREF(python_all_reduce, Py_NewRef(args[1]));
  return PyDescr_NewMethod((PyTypeObject *)args[0], &all_reduce_def);
}
