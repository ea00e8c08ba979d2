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

/* _all_reduce_fast_path(comm, handle, device, sendbuf, recvbuf, op, stream) -> bool */
PyObject *nbpy_all_reduce_fast_path(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 7) {
    PyErr_SetString(PyExc_TypeError, "_all_reduce_fast_path(comm, handle, device, sendbuf, recvbuf, op, stream)");
    return NULL;
  }
  PyObject *comm = args[0], *handle = args[1], *sendbuf = args[3], *recvbuf = args[4], *op = args[5];
  PyObject *stream = args[6];
  if (!ready()) return NULL;
  /* A destroyed communicator (handle 0): the Python path raises. */
  if (!PyLong_CheckExact(handle) || !PyLong_CheckExact(args[2]) || PyObject_Not(handle)) Py_RETURN_FALSE;
  long device = PyLong_AsLong(args[2]);
  if (device == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    Py_RETURN_FALSE;
  }

  PyObject *ret = NULL, *stream_value = NULL, *op_value = NULL;
  if (stream != Py_None && !PyLong_CheckExact(stream)) {
    stream = stream_value = PyObject_CallOneArg(stream_handle, stream);
    if (!stream) return NULL;
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
  ret = Py_NewRef(Py_True);
  goto done;
declined:
  if (known >= 0) ret = Py_NewRef(Py_False);
done:
  Py_XDECREF(op_value);
  Py_XDECREF(stream_value);
  return ret;
}
