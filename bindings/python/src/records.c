/* The base of every generated struct mirror (ncclbind._nccl.Record): memory
 * ownership and views, layout choice, the buffer protocol, repr, and the
 * field setters that need more than an assignment. */
#include "ncclbind_python.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int is_record_class(PyTypeObject *type) {
  return type != &nbpy_record_base_type && PyType_IsSubtype(type, &nbpy_record_base_type);
}

static const char *product_name(ncclbind_lib lib) { return lib == NCCLBIND_LIB_NCCL_EP ? "NCCL EP" : "NCCL"; }

/* ---- Layout choice ------------------------------------------------------ */

int nbpy_record_layout_for(const nbpy_record_class *cls, int code) {
  if (code <= 0) {
    if (cls->layout_count == 1) return 0;
    ncclbind_library_info info;
    code = ncclbind_get_library_info(cls->lib, &info) == NCCLBIND_OK ? info.version_code : 0;
    if (code <= 0) return cls->layout_count - 1;
  }
  int chosen = 0;
  for (int i = 0; i < cls->layout_count; ++i)
    if (cls->layouts[i].version_code <= code) chosen = i;
  return chosen;
}

/* layout=None | int version code | "X.Y.Z" -> a version code (0: the loaded library's). */
int nbpy_version_code_of(PyObject *version, int *code) {
  *code = 0;
  if (!version || version == Py_None) return 0;
  if (PyLong_Check(version)) {
    long v = PyLong_AsLong(version);
    if (v == -1 && PyErr_Occurred()) return -1;
    *code = (int)v;
    return 0;
  }
  if (PyUnicode_Check(version)) {
    const char *s = PyUnicode_AsUTF8(version);
    int major, minor, patch;
    if (s && sscanf(s, "%d.%d.%d", &major, &minor, &patch) == 3) {
      *code = major * 10000 + minor * 100 + patch;
      return 0;
    }
  }
  nbpy_raise_invalid("Record", "layout", "layout must be None, a version code or \"X.Y.Z\"");
  return -1;
}

/* ---- Construction ------------------------------------------------------- */

static nbpy_record *alloc_record(nbpy_record_class *cls, int layout) {
  nbpy_record *self = (nbpy_record *)cls->type.tp_alloc(&cls->type, 0);
  if (!self) return NULL;
  self->layout = layout;
  return self;
}

PyObject *nbpy_record_new(nbpy_record_class *cls, int layout, int initialized) {
  nbpy_record *self = alloc_record(cls, layout);
  if (!self) return NULL;
  const nbpy_record_layout *l = &cls->layouts[layout];
  self->data = PyMem_Calloc(1, (size_t)(l->size > 0 ? l->size : 1));
  if (!self->data) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  if (initialized && l->initialize) l->initialize(self->data);
  return (PyObject *)self;
}

/* The version stamp of layout l for a library of version code: see nbpy_record_initialized. */
static int stamp_for(const nbpy_record_layout *l, int code) {
  int stamp = l->version_codes[0];
  for (int i = 0; i < l->version_count; ++i)
    if (l->version_codes[i] <= code) stamp = l->version_codes[i];
  return stamp;
}

PyObject *nbpy_record_initialized(nbpy_record_class *cls, int code) {
  if (code <= 0) {
    ncclbind_library_info info;
    code = ncclbind_get_library_info(cls->lib, &info) == NCCLBIND_OK ? info.version_code : 0;
    if (code <= 0) code = INT_MAX; /* no library: the newest layout, as the initializer stamps it */
  }
  int layout = nbpy_record_layout_for(cls, code);
  nbpy_record *self = (nbpy_record *)nbpy_record_new(cls, layout, 1);
  const nbpy_record_layout *l = &cls->layouts[layout];
  if (!self || !l->initialize || l->version_count == 0) return (PyObject *)self;
  for (int f = 0; f < l->field_count; ++f) {
    const nbpy_field_layout *field = &l->fields[f];
    if (strcmp(field->name, "version") != 0 || field->offset < 0 || field->size != sizeof(unsigned)) continue;
    unsigned stamped;
    memcpy(&stamped, self->data + field->offset, sizeof stamped);
    /* Only a stamp the initializer wrote (one of this layout's header sets) is a version. */
    for (int i = 0; i < l->version_count; ++i)
      if ((unsigned)l->version_codes[i] == stamped) {
        unsigned stamp = (unsigned)stamp_for(l, code);
        memcpy(self->data + field->offset, &stamp, sizeof stamp);
        break;
      }
  }
  return (PyObject *)self;
}

PyObject *nbpy_record_copy_of(nbpy_record_class *cls, int layout, const void *p) {
  nbpy_record *self = (nbpy_record *)nbpy_record_new(cls, layout, 0);
  if (self) memcpy(self->data, p, (size_t)cls->layouts[layout].size);
  return (PyObject *)self;
}

PyObject *nbpy_record_view(nbpy_record_class *cls, int layout, void *p, PyObject *owner) {
  nbpy_record *self = alloc_record(cls, layout);
  if (!self) return NULL;
  self->data = p;
  Py_INCREF(owner);
  self->owner = owner;
  return (PyObject *)self;
}

/* Record(*, layout=None, **fields): zeroed memory in the layout the given (or
 * the loaded) library version uses, then each field set by name. */
static PyObject *record_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  if (!is_record_class(type)) {
    PyErr_SetString(PyExc_TypeError, "Record is the base of the generated struct mirrors");
    return NULL;
  }
  nbpy_record_class *cls = NBPY_RECORD_CLASS(type);
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_Format(PyExc_TypeError, "%s() takes keyword arguments only (field=value, layout=...)",
                 cls->c_name);
    return NULL;
  }
  PyObject *version = kwargs ? PyDict_GetItemString(kwargs, "layout") : NULL;
  int code;
  if (nbpy_version_code_of(version, &code) < 0) return NULL;
  PyObject *self = nbpy_record_new(cls, nbpy_record_layout_for(cls, code), 0);
  if (!self || !kwargs) return self;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "layout") == 0) continue;
    if (PyObject_SetAttr(self, key, value) < 0) {
      Py_DECREF(self);
      return NULL;
    }
  }
  return self;
}

static int record_traverse(nbpy_record *self, visitproc visit, void *arg) {
  Py_VISIT(self->owner);
  Py_VISIT(self->keepalive);
  return 0;
}

static int record_clear(nbpy_record *self) {
  Py_CLEAR(self->keepalive);
  return 0; /* owner stays: data points into it until the record goes */
}

static void record_dealloc(nbpy_record *self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->keepalive);
  if (self->owner)
    Py_CLEAR(self->owner);
  else
    PyMem_Free(self->data);
  self->data = NULL;
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- Fields -------------------------------------------------------------- */

/* Whether "X.Y.Z" `version` is `other` or newer. */
static int version_at_least(const char *version, const char *other) {
  unsigned a[3] = {0, 0, 0}, b[3] = {0, 0, 0};
  sscanf(version, "%u.%u.%u", &a[0], &a[1], &a[2]);
  sscanf(other, "%u.%u.%u", &b[0], &b[1], &b[2]);
  for (int i = 0; i < 3; ++i)
    if (a[i] != b[i]) return a[i] > b[i];
  return 1;
}

static PyObject *missing_field_error(nbpy_record *self, const char *field, const char *since, const char *until) {
  nbpy_record_class *cls = NBPY_RECORD_CLASS(Py_TYPE(self));
  const nbpy_record_layout *l = &cls->layouts[self->layout];
  const char *product = product_name(cls->lib);
  if (until && *until && version_at_least(l->version, until))
    return nbpy_raise_invalid(cls->c_name, field,
                              "%s.%s is not in the layout this record uses (the %s %s layout, "
                              "chosen for the loaded library); %s %s removed it (from %s to before %s it is there)",
                              cls->c_name, field, product, l->version, product, until, since, until);
  return nbpy_raise_invalid(cls->c_name, field,
                            "%s.%s is not in the layout this record uses (the %s %s layout, "
                            "chosen for the loaded library); it first appears in %s %s",
                            cls->c_name, field, product, l->version, product, since);
}

PyObject *nbpy_record_missing_field(nbpy_record *self, const char *field, const char *since, const char *until) {
  return missing_field_error(self, field, since, until);
}

int nbpy_record_missing_field_set(nbpy_record *self, const char *field, const char *since, const char *until) {
  missing_field_error(self, field, since, until);
  return -1;
}

int nbpy_record_no_delete(const char *field) {
  PyErr_Format(PyExc_AttributeError, "record field %s cannot be deleted", field);
  return -1;
}

int nbpy_record_keep(nbpy_record *self, const char *field, PyObject *obj) {
  if (obj == Py_None || !obj) {
    if (!self->keepalive) return 0;
    if (PyDict_DelItemString(self->keepalive, field) < 0) PyErr_Clear();
    return 0;
  }
  if (!self->keepalive && !(self->keepalive = PyDict_New())) return -1;
  return PyDict_SetItemString(self->keepalive, field, obj);
}

int nbpy_set_record_field(nbpy_record *self, const char *field, PyObject *value,
                          nbpy_record_class *cls, void *dst, size_t size) {
  if (!value) return nbpy_record_no_delete(field);
  if (Py_TYPE(value) != &cls->type) {
    nbpy_raise_invalid(NBPY_RECORD_CLASS(Py_TYPE(self))->c_name, field, "%s must be a %s, not %s",
                       field, cls->c_name, Py_TYPE(value)->tp_name);
    return -1;
  }
  nbpy_record *src = (nbpy_record *)value;
  if ((size_t)cls->layouts[src->layout].size != size) {
    nbpy_raise_invalid(NBPY_RECORD_CLASS(Py_TYPE(self))->c_name, field,
                       "%s: the %s has the %s layout; this field holds another", field,
                       cls->c_name, cls->layouts[src->layout].version);
    return -1;
  }
  memmove(dst, src->data, size);
  return 0;
}

int nbpy_set_pointer_field(nbpy_record *self, const char *field, PyObject *value, void **dst) {
  if (!value) return nbpy_record_no_delete(field);
  const char *owner_name = NBPY_RECORD_CLASS(Py_TYPE(self))->c_name;
  if (PyObject_TypeCheck(value, &nbpy_record_base_type)) {
    *dst = ((nbpy_record *)value)->data;
    return nbpy_record_keep(self, field, value);
  }
  if (value == Py_None || PyLong_Check(value)) {
    void *p;
    if (nbpy_arg_pointer(value, owner_name, field, &p) < 0) return -1;
    *dst = p;
    return nbpy_record_keep(self, field, Py_None);
  }
  if (PyObject_CheckBuffer(value)) {
    PyObject *view = PyMemoryView_FromObject(value); /* pins the exporter's memory */
    if (!view) return -1;
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    if (!PyBuffer_IsContiguous(b, 'C')) {
      Py_DECREF(view);
      nbpy_raise_invalid(owner_name, field, "%s: a buffer must be C-contiguous", field);
      return -1;
    }
    *dst = b->buf;
    int r = nbpy_record_keep(self, field, view);
    Py_DECREF(view);
    return r;
  }
  nbpy_raise_invalid(owner_name, field, "%s must be an address (int), None, a record or a buffer, not %s",
                     field, Py_TYPE(value)->tp_name);
  return -1;
}

int nbpy_set_string_field(nbpy_record *self, const char *field, PyObject *value, const char **dst) {
  if (!value) return nbpy_record_no_delete(field);
  const char *owner_name = NBPY_RECORD_CLASS(Py_TYPE(self))->c_name;
  PyObject *bytes = NULL;
  if (value == Py_None) {
    *dst = NULL;
    return nbpy_record_keep(self, field, Py_None);
  }
  if (PyUnicode_Check(value)) {
    bytes = PyUnicode_AsUTF8String(value);
    if (!bytes) {
      if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
      PyErr_Clear(); /* a lone surrogate: no UTF-8 for NCCL */
      nbpy_raise_invalid(owner_name, field, "%s is not valid Unicode text (it holds a lone surrogate)", field);
      return -1;
    }
  } else if (PyBytes_Check(value)) {
    Py_INCREF(value);
    bytes = value;
  } else {
    nbpy_raise_invalid(owner_name, field, "%s must be str, bytes or None, not %s", field,
                       Py_TYPE(value)->tp_name);
    return -1;
  }
  if ((Py_ssize_t)strlen(PyBytes_AS_STRING(bytes)) != PyBytes_GET_SIZE(bytes)) {
    Py_DECREF(bytes);
    nbpy_raise_invalid(owner_name, field, "%s contains a NUL character", field);
    return -1;
  }
  *dst = PyBytes_AS_STRING(bytes);
  int r = nbpy_record_keep(self, field, bytes);
  Py_DECREF(bytes);
  return r;
}

int nbpy_set_bytes_field(const char *field, PyObject *value, void *dst, size_t size) {
  if (!value) return nbpy_record_no_delete(field);
  Py_buffer view;
  if (PyObject_GetBuffer(value, &view, PyBUF_C_CONTIGUOUS) < 0) {
    PyErr_Clear();
    nbpy_raise_invalid("Record", field, "%s must be bytes-like, not %s", field, Py_TYPE(value)->tp_name);
    return -1;
  }
  if ((size_t)view.len > size) {
    PyBuffer_Release(&view);
    nbpy_raise_invalid("Record", field, "%s holds at most %zu bytes", field, size);
    return -1;
  }
  memset(dst, 0, size);
  memcpy(dst, view.buf, (size_t)view.len);
  PyBuffer_Release(&view);
  return 0;
}

/* ---- Arguments ------------------------------------------------------------ */

int nbpy_arg_record(PyObject *o, nbpy_record_class *cls, const char *fn, const char *arg,
                    nbpy_held *held, void **out) {
  if (Py_TYPE(o) == &cls->type) {
    *out = ((nbpy_record *)o)->data;
    return 0;
  }
  Py_ssize_t size = cls->layouts[cls->layout_count - 1].size;
  if (!PyObject_TypeCheck(o, &nbpy_record_base_type) && PyObject_CheckBuffer(o)) {
    if (PyObject_GetBuffer(o, &held->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    held->has_view = 1;
    if (held->view.len != size) {
      nbpy_raise_invalid(fn, arg, "%s: %s must be %zd bytes (a %s), not %zd", fn, arg, size,
                         cls->c_name, held->view.len);
      return -1;
    }
    *out = held->view.buf;
    return 0;
  }
  nbpy_raise_invalid(fn, arg, "%s: %s must be a %s or %zd bytes, not %s", fn, arg, cls->c_name, size,
                     Py_TYPE(o)->tp_name);
  return -1;
}

int nbpy_arg_record_pointer(PyObject *o, nbpy_record_class *cls, const char *fn, const char *arg,
                            int writable, nbpy_held *held, void **out) {
  if (Py_TYPE(o) == &cls->type) {
    *out = ((nbpy_record *)o)->data;
    return 0;
  }
  if (o == Py_None || PyLong_Check(o)) return nbpy_arg_pointer(o, fn, arg, out);
  if (!PyObject_TypeCheck(o, &nbpy_record_base_type) && PyObject_CheckBuffer(o)) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &held->view, flags) < 0) {
      PyErr_Clear();
      nbpy_raise_invalid(fn, arg, "%s: %s must be a C-contiguous%s buffer", fn, arg, writable ? ", writable" : "");
      return -1;
    }
    held->has_view = 1;
    for (int i = 0; i < cls->layout_count; ++i)
      if (held->view.len == cls->layouts[i].size) {
        *out = held->view.buf;
        return 0;
      }
    nbpy_raise_invalid(fn, arg, "%s: %s is %zd bytes, which is no layout of %s", fn, arg, held->view.len,
                       cls->c_name);
    return -1;
  }
  nbpy_raise_invalid(fn, arg, "%s: %s must be a %s, its bytes, an address (int) or None, not %s", fn, arg,
                     cls->c_name, Py_TYPE(o)->tp_name);
  return -1;
}

/* ---- Buffer protocol -------------------------------------------------------- */

static int record_getbuffer(nbpy_record *self, Py_buffer *view, int flags) {
  nbpy_record_class *cls = NBPY_RECORD_CLASS(Py_TYPE(self));
  int r = PyBuffer_FillInfo(view, (PyObject *)self, self->data, cls->layouts[self->layout].size, 0,
                            flags);
  if (r == 0) ++self->exports;
  return r;
}

static void record_releasebuffer(nbpy_record *self, Py_buffer *view) {
  (void)view;
  --self->exports;
}

static PyBufferProcs record_buffer_procs = {
    .bf_getbuffer = (getbufferproc)record_getbuffer,
    .bf_releasebuffer = (releasebufferproc)record_releasebuffer,
};

/* ---- Methods and properties --------------------------------------------------- */

static PyObject *record_from_address(PyTypeObject *type, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames) {
  static const char usage[] = "from_address(address, *, layout=None, owner=None)";
  if (!is_record_class(type)) {
    PyErr_SetString(PyExc_TypeError, "from_address is called on a generated record class");
    return NULL;
  }
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError, "%s takes one positional argument", usage);
    return NULL;
  }
  PyObject *version = NULL, *owner = Py_None;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_CompareWithASCIIString(name, "layout") == 0)
      version = args[nargs + i];
    else if (PyUnicode_CompareWithASCIIString(name, "owner") == 0)
      owner = args[nargs + i];
    else {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword %R", usage, name);
      return NULL;
    }
  }
  nbpy_record_class *cls = NBPY_RECORD_CLASS(type);
  void *p;
  int code;
  if (nbpy_arg_pointer(args[0], cls->c_name, "address", &p) < 0 || nbpy_version_code_of(version, &code) < 0)
    return NULL;
  if (!p) return nbpy_raise_invalid(cls->c_name, "address", "from_address: the address is NULL");
  return nbpy_record_view(cls, nbpy_record_layout_for(cls, code), p, owner);
}

static PyObject *record_from_buffer(PyTypeObject *type, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  if (!is_record_class(type) || nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "from_buffer(buffer, *, layout=None) on a generated record class");
    return NULL;
  }
  PyObject *version = NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "layout") != 0) {
      PyErr_SetString(PyExc_TypeError, "from_buffer takes only the keyword layout");
      return NULL;
    }
    version = args[nargs + i];
  }
  nbpy_record_class *cls = NBPY_RECORD_CLASS(type);
  int code;
  if (nbpy_version_code_of(version, &code) < 0) return NULL;
  int layout = nbpy_record_layout_for(cls, code);
  PyObject *view = PyMemoryView_FromObject(args[0]);
  if (!view) return NULL;
  Py_buffer *b = PyMemoryView_GET_BUFFER(view);
  PyObject *result = NULL;
  if (b->readonly)
    nbpy_raise_invalid(cls->c_name, "buffer", "from_buffer needs a writable buffer");
  else if (!PyBuffer_IsContiguous(b, 'C'))
    nbpy_raise_invalid(cls->c_name, "buffer", "from_buffer needs a C-contiguous buffer");
  else if (b->len < cls->layouts[layout].size)
    nbpy_raise_invalid(cls->c_name, "buffer", "from_buffer: %zd bytes is smaller than %s (%zd bytes)",
                       b->len, cls->c_name, cls->layouts[layout].size);
  else
    result = nbpy_record_view(cls, layout, b->buf, view);
  Py_DECREF(view);
  return result;
}

static PyObject *record_copy(nbpy_record *self, PyObject *unused) {
  (void)unused;
  nbpy_record_class *cls = NBPY_RECORD_CLASS(Py_TYPE(self));
  nbpy_record *copy = (nbpy_record *)nbpy_record_new(cls, self->layout, 0);
  if (!copy) return NULL;
  memcpy(copy->data, self->data, (size_t)cls->layouts[self->layout].size);
  if (self->keepalive && !(copy->keepalive = PyDict_Copy(self->keepalive))) {
    Py_DECREF(copy);
    return NULL;
  }
  return (PyObject *)copy;
}

static PyObject *record_get_address(nbpy_record *self, void *closure) {
  (void)closure;
  return nbpy_from_pointer(self->data);
}

static PyObject *record_get_nbytes(nbpy_record *self, void *closure) {
  (void)closure;
  return PyLong_FromSsize_t(NBPY_RECORD_CLASS(Py_TYPE(self))->layouts[self->layout].size);
}

static PyObject *record_get_layout_version(nbpy_record *self, void *closure) {
  (void)closure;
  return PyUnicode_FromString(NBPY_RECORD_CLASS(Py_TYPE(self))->layouts[self->layout].version);
}

static PyObject *record_repr(nbpy_record *self) {
  PyTypeObject *type = Py_TYPE(self);
  PyObject *parts = PyList_New(0);
  if (!parts) return NULL;
  for (PyGetSetDef *g = type->tp_getset; g && g->name; ++g) {
    PyObject *value = g->get((PyObject *)self, g->closure);
    if (!value) { /* a field this layout lacks */
      PyErr_Clear();
      continue;
    }
    PyObject *part = PyUnicode_FromFormat("%s=%R", g->name, value);
    Py_DECREF(value);
    if (!part || PyList_Append(parts, part) < 0) {
      Py_XDECREF(part);
      Py_DECREF(parts);
      return NULL;
    }
    Py_DECREF(part);
  }
  PyObject *sep = PyUnicode_FromString(", ");
  PyObject *joined = sep ? PyUnicode_Join(sep, parts) : NULL;
  Py_XDECREF(sep);
  Py_DECREF(parts);
  if (!joined) return NULL;
  PyObject *r = PyUnicode_FromFormat("%s(%U)", NBPY_RECORD_CLASS(type)->c_name, joined);
  Py_DECREF(joined);
  return r;
}

static PyMethodDef record_methods[] = {
    {"from_address", (PyCFunction)(void (*)(void))record_from_address,
     METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_address(address, *, layout=None, owner=None)\n--\n\n"
     "A record viewing memory at an address (no copy). owner is kept alive as long as\n"
     "the record; the caller keeps the memory valid otherwise."},
    {"from_ptr", (PyCFunction)(void (*)(void))record_from_address, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_ptr(address, *, layout=None, owner=None)\n--\n\nThe same as from_address."},
    {"from_buffer", (PyCFunction)(void (*)(void))record_from_buffer,
     METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_buffer(buffer, *, layout=None)\n--\n\n"
     "A record viewing a writable buffer-protocol object's memory (no copy)."},
    {"copy", (PyCFunction)record_copy, METH_NOARGS, "An owned copy of this record."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef record_getset[] = {
    {"address", (getter)record_get_address, NULL, "Address of the record's memory (int).", NULL},
    {"nbytes", (getter)record_get_nbytes, NULL, "Size of the record's layout in bytes.", NULL},
    {"layout_version", (getter)record_get_layout_version, NULL,
     "First library version of the layout this record uses, e.g. \"2.28.9\".", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject nbpy_record_base_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.Record",
    .tp_basicsize = sizeof(nbpy_record),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Base of the struct mirrors: memory in one of the record's C layouts.\n\n"
              "Construct a record with keyword arguments (field=value, layout=None). layout is a\n"
              "library version (\"2.28.9\" or 22809); the record takes the C layout that version\n"
              "uses, by default the loaded library's. Memory starts zeroed, as in C; the\n"
              "module's *_initializer() functions return records filled as NCCL's macros do.",
    .tp_dealloc = (destructor)record_dealloc,
    .tp_traverse = (traverseproc)record_traverse,
    .tp_clear = (inquiry)record_clear,
    .tp_repr = (reprfunc)record_repr,
    .tp_as_buffer = &record_buffer_procs,
    .tp_methods = record_methods,
    .tp_getset = record_getset,
    .tp_new = record_tp_new,
};

/* ---- Class setup ----------------------------------------------------------- */

static PyObject *layouts_tuple(const nbpy_record_class *cls) {
  PyObject *layouts = PyTuple_New(cls->layout_count);
  if (!layouts) return NULL;
  for (int i = 0; i < cls->layout_count; ++i) {
    const nbpy_record_layout *l = &cls->layouts[i];
    PyObject *fields = PyDict_New();
    if (!fields) goto fail;
    for (int f = 0; f < l->field_count; ++f) {
      PyObject *where = Py_BuildValue("(nn)", l->fields[f].offset, l->fields[f].size);
      if (!where || PyDict_SetItemString(fields, l->fields[f].name, where) < 0) {
        Py_XDECREF(where);
        Py_DECREF(fields);
        goto fail;
      }
      Py_DECREF(where);
    }
    PyObject *codes = PyTuple_New(l->version_count);
    if (!codes) {
      Py_DECREF(fields);
      goto fail;
    }
    for (int v = 0; v < l->version_count; ++v) PyTuple_SET_ITEM(codes, v, PyLong_FromLong(l->version_codes[v]));
    PyObject *entry = Py_BuildValue("{s:s,s:i,s:N,s:n,s:n,s:N}", "version", l->version, "version_code",
                                    l->version_code, "version_codes", codes, "size", l->size, "align",
                                    l->align, "fields", fields);
    if (!entry) goto fail;
    PyTuple_SET_ITEM(layouts, i, entry);
  }
  return layouts;
fail:
  Py_DECREF(layouts);
  return NULL;
}

int nbpy_record_class_ready(nbpy_record_class *cls, PyObject *module) {
  PyTypeObject *type = &cls->type;
  type->tp_base = &nbpy_record_base_type;
  type->tp_basicsize = sizeof(nbpy_record);
  type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  type->tp_traverse = (traverseproc)record_traverse;
  type->tp_clear = (inquiry)record_clear;
  type->tp_new = record_tp_new;
  if (PyType_Ready(type) < 0) return -1;
  PyObject *layouts = layouts_tuple(cls);
  if (!layouts) return -1;
  int r = PyDict_SetItemString(type->tp_dict, "layouts", layouts);
  Py_DECREF(layouts);
  if (r == 0 && cls->initializer) {
    PyObject *name = PyUnicode_FromString(cls->initializer);
    r = name ? PyDict_SetItemString(type->tp_dict, "initializer", name) : -1;
    Py_XDECREF(name);
  }
  PyType_Modified(type);
  if (r < 0) return -1;
  Py_INCREF(type);
  if (PyModule_AddObject(module, cls->c_name, (PyObject *)type) < 0) {
    Py_DECREF(type);
    return -1;
  }
  return 0;
}
