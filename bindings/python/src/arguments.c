/* Python argument -> C value conversions for the generated wrappers. The
 * inline fast paths live in ncclbind_python.h; these are the general cases and
 * the error messages. */
#include "ncclbind_python.h"

#include <limits.h>
#include <string.h>

static const char *type_name(PyObject *o) { return Py_TYPE(o)->tp_name; }

/* The integer value of o (ints, IntEnum members, objects with __index__; not
 * float, not str, not bool: True is no count, rank or address). Returns 1 when
 * it fits in 64 bits only unsigned. */
static int integer_value(PyObject *o, const char *fn, const char *arg, long long *value,
                         unsigned long long *uvalue, int *negative) {
  if (PyBool_Check(o) || PyFloat_Check(o) || !PyIndex_Check(o)) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be an int, not %s", fn, arg, type_name(o));
    return -1;
  }
  PyObject *index = PyNumber_Index(o);
  if (!index) return -1;
  int overflow = 0;
  *value = PyLong_AsLongLongAndOverflow(index, &overflow);
  *negative = overflow < 0 || (!overflow && *value < 0);
  if (overflow > 0) {
    *uvalue = PyLong_AsUnsignedLongLong(index);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      Py_DECREF(index);
      nbpy_raise_invalid(fn, arg, "%s: %s does not fit in 64 bits", fn, arg);
      return -1;
    }
  } else {
    *uvalue = (unsigned long long)*value;
  }
  Py_DECREF(index);
  if (overflow < 0) {
    nbpy_raise_invalid(fn, arg, "%s: %s does not fit in 64 bits", fn, arg);
    return -1;
  }
  if (overflow > 0) *value = LLONG_MAX; /* only meaningful through uvalue */
  return overflow > 0 ? 1 : 0;
}

int nbpy_arg_signed_slow(PyObject *o, const char *fn, const char *arg, long long lo, long long hi,
                         long long *out) {
  long long v;
  unsigned long long u;
  int negative;
  int r = integer_value(o, fn, arg, &v, &u, &negative);
  if (r < 0) return -1;
  if (r > 0 || v < lo || v > hi) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be in [%lld, %lld]", fn, arg, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

int nbpy_arg_unsigned_slow(PyObject *o, const char *fn, const char *arg, unsigned long long hi,
                           unsigned long long *out) {
  long long v;
  unsigned long long u;
  int negative;
  if (integer_value(o, fn, arg, &v, &u, &negative) < 0) return -1;
  if (negative || u > hi) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be in [0, %llu]", fn, arg, hi);
    return -1;
  }
  *out = u;
  return 0;
}

/* Records are not addresses here: a record is accepted only where the IR says
 * that record (nbpy_arg_record, nbpy_arg_record_pointer). */
int nbpy_arg_pointer_slow(PyObject *o, const char *fn, const char *arg, void **out) {
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  if (PyBool_Check(o) || PyFloat_Check(o) || !PyIndex_Check(o)) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be an address (int) or None, not %s", fn, arg,
                       type_name(o));
    return -1;
  }
  unsigned long long u;
  if (nbpy_arg_unsigned_slow(o, fn, arg, UINTPTR_MAX, &u) < 0) return -1;
  *out = (void *)(uintptr_t)u;
  return 0;
}

int nbpy_arg_handle(PyObject *o, const char *fn, const char *arg, void **out) {
  if (nbpy_arg_pointer(o, fn, arg, out) < 0) return -1;
  if (!*out) {
    nbpy_raise_invalid(fn, arg, "%s: %s must not be None or 0 (the library would dereference it)", fn,
                       arg);
    return -1;
  }
  return 0;
}

int nbpy_arg_double(PyObject *o, const char *fn, const char *arg, double *out) {
  if (PyFloat_CheckExact(o)) {
    *out = PyFloat_AS_DOUBLE(o);
    return 0;
  }
  if (PyBool_Check(o) || (!PyFloat_Check(o) && !PyLong_Check(o) && !PyIndex_Check(o))) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be a number, not %s", fn, arg, type_name(o));
    return -1;
  }
  double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    nbpy_raise_invalid(fn, arg, "%s: %s is not representable as a double", fn, arg);
    return -1;
  }
  *out = v;
  return 0;
}

int nbpy_arg_bool(PyObject *o, const char *fn, const char *arg, int *out) {
  if (o == Py_True || o == Py_False) {
    *out = o == Py_True;
    return 0;
  }
  long long v;
  if (PyLong_Check(o) && nbpy_arg_signed_slow(o, fn, arg, 0, 1, &v) == 0) {
    *out = (int)v;
    return 0;
  }
  if (!PyErr_Occurred())
    nbpy_raise_invalid(fn, arg, "%s: %s must be a bool, not %s", fn, arg, type_name(o));
  return -1;
}

void nbpy_release(nbpy_held *held) {
  if (held->has_view) PyBuffer_Release(&held->view);
  held->has_view = 0;
  Py_CLEAR(held->object);
  PyMem_Free(held->allocated);
  held->allocated = NULL;
}

int nbpy_arg_memory(PyObject *o, const char *fn, const char *arg, int writable, nbpy_held *held,
                    void **out) {
  if (o == Py_None || PyLong_Check(o)) return nbpy_arg_pointer(o, fn, arg, out);
  if (PyObject_TypeCheck(o, &nbpy_record_base_type)) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be an address (int), a buffer or None, not a record (%s)",
                       fn, arg, type_name(o));
    return -1;
  }
  if (PyObject_CheckBuffer(o)) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &held->view, flags) < 0) {
      PyErr_Clear();
      nbpy_raise_invalid(fn, arg, "%s: %s must be a C-contiguous%s buffer", fn, arg,
                         writable ? ", writable" : "");
      return -1;
    }
    held->has_view = 1;
    *out = held->view.buf;
    return 0;
  }
  return nbpy_arg_pointer_slow(o, fn, arg, out);
}

int nbpy_arg_string(PyObject *o, const char *fn, const char *arg, nbpy_held *held, const char **out) {
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  if (PyUnicode_Check(o)) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) {
      if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
      PyErr_Clear(); /* a lone surrogate: no UTF-8 for NCCL */
      nbpy_raise_invalid(fn, arg, "%s: %s is not valid Unicode text (it holds a lone surrogate)", fn, arg);
      return -1;
    }
    if ((Py_ssize_t)strlen(s) != n) {
      nbpy_raise_invalid(fn, arg, "%s: %s contains a NUL character", fn, arg);
      return -1;
    }
    *out = s; /* cached in the str object, which the caller holds */
    return 0;
  }
  if (PyBytes_Check(o)) {
    if ((Py_ssize_t)strlen(PyBytes_AS_STRING(o)) != PyBytes_GET_SIZE(o)) {
      nbpy_raise_invalid(fn, arg, "%s: %s contains a NUL byte", fn, arg);
      return -1;
    }
    *out = PyBytes_AS_STRING(o);
    return 0;
  }
  (void)held;
  nbpy_raise_invalid(fn, arg, "%s: %s must be str, bytes or None, not %s", fn, arg, type_name(o));
  return -1;
}

int nbpy_arg_sequence(PyObject *o, const char *fn, const char *arg, Py_ssize_t *length) {
  if (o == Py_None) {
    *length = 0;
    return 0;
  }
  if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) {
    nbpy_raise_invalid(fn, arg, "%s: %s must be a sequence or None, not %s", fn, arg, type_name(o));
    return -1;
  }
  Py_ssize_t n = PySequence_Size(o);
  if (n < 0) return -1;
  if (n > INT_MAX) {
    nbpy_raise_invalid(fn, arg, "%s: %s has more than %d elements", fn, arg, INT_MAX);
    return -1;
  }
  *length = n;
  return 0;
}

void *nbpy_temp_array(nbpy_held *held, Py_ssize_t n, size_t element_size) {
  held->allocated = PyMem_Calloc(n > 0 ? (size_t)n : 1, element_size);
  if (!held->allocated) PyErr_NoMemory();
  return held->allocated;
}

PyObject *nbpy_from_pointer(const void *p) { return PyLong_FromUnsignedLongLong((uintptr_t)p); }

PyObject *nbpy_from_string(const char *s) {
  if (!s) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}
