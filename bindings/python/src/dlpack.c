/* Reading a DLPack capsule without taking it: NcclBuffer needs the address,
 * shape, strides, dtype, device and read-only flag of a __dlpack__ export,
 * and Python cannot read the C struct without ctypes. The capsule keeps its
 * name, so its destructor returns the export to the producer; the producer's
 * object (which NcclBuffer holds) keeps the memory alive.
 * The structs are DLPack's ABI (dlpack.h v0.8 / v1.x), declared here. */
#include "ncclbind_python.h"

typedef struct dl_device {
  int32_t device_type;
  int32_t device_id;
} dl_device;

typedef struct dl_data_type {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} dl_data_type;

typedef struct dl_tensor {
  void *data;
  dl_device device;
  int32_t ndim;
  dl_data_type dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL: compact row-major */
  uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed_tensor { /* capsule "dltensor" */
  dl_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct dl_managed_tensor *);
} dl_managed_tensor;

typedef struct dl_managed_tensor_versioned { /* capsule "dltensor_versioned" (DLPack >= 1.0) */
  struct {
    uint32_t major, minor;
  } version;
  void *manager_ctx;
  void (*deleter)(struct dl_managed_tensor_versioned *);
  uint64_t flags; /* bit 0: read-only */
  dl_tensor dl_tensor;
} dl_managed_tensor_versioned;

static PyObject *int64_tuple(const int64_t *values, int32_t n) {
  PyObject *t = PyTuple_New(n);
  for (int32_t i = 0; t && i < n; ++i) {
    PyObject *v = PyLong_FromLongLong(values[i]);
    if (!v) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}

/* dlpack_info(capsule) -> (address, shape, strides or None, (code, bits, lanes),
 * (device_type, device_id), read_only) */
PyObject *nbpy_dlpack_info(PyObject *self, PyObject *capsule) {
  (void)self;
  const dl_tensor *t;
  int read_only = 0;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    dl_managed_tensor_versioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (!m) return NULL;
    if (m->version.major != 1)
      return nbpy_raise_invalid("dlpack", "buffer", "DLPack %u.%u export: only major version 1 is understood",
                                m->version.major, m->version.minor);
    t = &m->dl_tensor;
    read_only = (int)(m->flags & 1u);
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    dl_managed_tensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (!m) return NULL;
    t = &m->dl_tensor;
  } else {
    return nbpy_raise_invalid("dlpack", "buffer",
                              "__dlpack__ did not return an unconsumed DLPack capsule");
  }
  if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
    return nbpy_raise_invalid("dlpack", "buffer", "malformed DLPack tensor (ndim %d)", t->ndim);
  PyObject *shape = int64_tuple(t->shape, t->ndim);
  PyObject *strides = t->strides ? int64_tuple(t->strides, t->ndim) : Py_NewRef(Py_None);
  if (!shape || !strides) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  return Py_BuildValue("(KNN(iii)(ii)O)", (unsigned long long)((uintptr_t)t->data + t->byte_offset), shape,
                       strides, t->dtype.code, t->dtype.bits, t->dtype.lanes, t->device.device_type,
                       t->device.device_id, read_only ? Py_True : Py_False);
}
