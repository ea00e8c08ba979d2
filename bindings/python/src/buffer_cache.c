/* The C side of buffer.py's per-object cache (see buffer_cache.h). buffer.py
 * hands over its containers once (_buffer_cache_setup): its map of NumPy dtype
 * numbers to NcclDataType; the set of types it reads as CuPy arrays that cannot
 * be weakly referenced; and the NcclBuffer class, whose objects are resolutions
 * already (_from_buffer). The cache itself, id(obj) -> entry, is a table here
 * (buffer.py's _entries is a view of it). Entries are made only by
 * _buffer_cache_remember, which buffer.py calls when it has resolved an object
 * (its device and writability are checked at each use); an entry goes when its
 * object does. */
#include "buffer_cache.h"

#include <limits.h>

static int set_up;
static PyObject *numpy_dtypes; /* buffer.py's _numpy_dtypes: dtype.num -> NcclDataType */
static PyObject *cupy_types;   /* buffer.py's _read_as_cupy */
static PyTypeObject *buffer_type; /* NcclBuffer */

/* Attribute names, interned once: the names buffer.py reads. */
static PyObject *s_ptr, *s_count, *s_dtype, *s_device, *s_readonly, *s_data_ptr, *s_numel, *s_c_contiguous, *s_num,
    *s_data, *s_size, *s_device_id, *s_complex;

typedef struct cache_entry {
  PyObject_HEAD
  PyObject *ref;    /* weak reference to the object; its callback drops the entry */
  PyObject *buffer; /* the object's NcclBuffer, without owner */
  int probe;        /* torch: valid while data_ptr() and numel() are unchanged */
  nbpy_known_buffer known;
} cache_entry;

static void cache_entry_dealloc(cache_entry *self) {
  Py_XDECREF(self->ref);
  Py_XDECREF(self->buffer);
  Py_XDECREF(self->known.dtype);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *cache_entry_repr(cache_entry *self) {
  return PyUnicode_FromFormat("<buffer cache entry %R%s>", self->buffer, self->probe ? ", probed" : "");
}

static PyTypeObject cache_entry_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.BufferCacheEntry",
    .tp_basicsize = sizeof(cache_entry),
    .tp_dealloc = (destructor)cache_entry_dealloc,
    .tp_repr = (reprfunc)cache_entry_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One object's entry in ncclbind.base.buffer's cache (made by _buffer_cache_remember).",
};

/* ---- the table: object address -> its entry (a strong reference) ----
 * Open addressing with linear probing, at most half full. A lookup costs a hash
 * of the address and a compare or two: a dict keyed by id(obj) cost an int made
 * per lookup and a dict probe, about 25 ns more per buffer on the fast path. */
typedef struct table_slot {
  void *address; /* NULL: empty */
  PyObject *entry;
} table_slot;

static table_slot *table;
static size_t table_capacity, table_used; /* capacity: 0 or a power of two */

static size_t home_of(void *address, size_t capacity) {
  /* Fibonacci hashing: objects are 16-byte aligned, so their low bits say nothing. */
  return (size_t)(((uintptr_t)address >> 4) * 0x9E3779B97F4A7C15ull) & (capacity - 1);
}

static size_t slot_of(void *address) { /* its slot, or the empty one where it would go */
  size_t i = home_of(address, table_capacity);
  while (table[i].address && table[i].address != address) i = (i + 1) & (table_capacity - 1);
  return i;
}

static PyObject *table_get(void *address) { /* borrowed, or NULL */
  if (!table_used) return NULL;
  return table[slot_of(address)].entry;
}

static int table_grow(void) {
  size_t capacity = table_capacity ? table_capacity * 2 : 64;
  table_slot *old = table, *fresh = PyMem_Calloc(capacity, sizeof *fresh);
  if (!fresh) {
    PyErr_NoMemory();
    return -1;
  }
  size_t old_capacity = table_capacity;
  table = fresh;
  table_capacity = capacity;
  for (size_t i = 0; i < old_capacity; ++i)
    if (old[i].address) table[slot_of(old[i].address)] = old[i];
  PyMem_Free(old);
  return 0;
}

static int table_set(void *address, PyObject *entry) {
  if ((table_used + 1) * 2 > table_capacity && table_grow() < 0) return -1;
  table_slot *slot = &table[slot_of(address)];
  PyObject *old = slot->entry;
  if (!old) ++table_used;
  slot->address = address;
  slot->entry = Py_NewRef(entry);
  Py_XDECREF(old); /* last: its release may run code that uses the table */
  return 0;
}

static int table_del(void *address) { /* 0: it was not there */
  if (!table_used) return 0;
  size_t i = slot_of(address);
  PyObject *old = table[i].entry;
  if (!old) return 0;
  /* Backward-shift deletion: move up any later slot of the run whose home the hole now separates it from. */
  for (size_t j = (i + 1) & (table_capacity - 1); table[j].address; j = (j + 1) & (table_capacity - 1)) {
    size_t home = home_of(table[j].address, table_capacity);
    if (((j - home) & (table_capacity - 1)) >= ((j - i) & (table_capacity - 1))) {
      table[i] = table[j];
      i = j;
    }
  }
  table[i].address = NULL;
  table[i].entry = NULL;
  --table_used;
  Py_DECREF(old);
  return 1;
}

/* buffer.py's _entries: the table as a mapping id(obj) -> entry, for tests and inspection. */
static int address_of_key(PyObject *key, void **out) {
  if (!PyLong_Check(key)) {
    PyErr_SetObject(PyExc_KeyError, key);
    return -1;
  }
  *out = PyLong_AsVoidPtr(key);
  return *out || !PyErr_Occurred() ? 0 : -1;
}

static Py_ssize_t entries_length(PyObject *self) {
  (void)self;
  return (Py_ssize_t)table_used;
}

static PyObject *entries_get(PyObject *self, PyObject *key) {
  (void)self;
  void *address;
  if (address_of_key(key, &address) < 0) return NULL;
  PyObject *entry = table_get(address);
  if (!entry) PyErr_SetObject(PyExc_KeyError, key);
  return Py_XNewRef(entry);
}

static int entries_set(PyObject *self, PyObject *key, PyObject *value) {
  (void)self;
  void *address;
  if (address_of_key(key, &address) < 0) return -1;
  if (!value) {
    if (table_del(address)) return 0;
    PyErr_SetObject(PyExc_KeyError, key);
    return -1;
  }
  if (!Py_IS_TYPE(value, &cache_entry_type)) {
    PyErr_SetString(PyExc_TypeError, "the buffer cache holds only its own entries");
    return -1;
  }
  return table_set(address, value);
}

static int entries_contains(PyObject *self, PyObject *key) {
  (void)self;
  void *address;
  if (!PyLong_Check(key)) return 0;
  if (address_of_key(key, &address) < 0) {
    PyErr_Clear(); /* an int no address can be */
    return 0;
  }
  return table_get(address) != NULL;
}

static PyMappingMethods entries_mapping = {entries_length, entries_get, entries_set};
static PySequenceMethods entries_sequence = {.sq_contains = entries_contains};

static PyTypeObject entries_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.BufferCacheEntries",
    .tp_basicsize = sizeof(PyObject),
    .tp_as_mapping = &entries_mapping,
    .tp_as_sequence = &entries_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ncclbind.base.buffer's cache: id(obj) -> its entry (a view of the extension's table).",
};

/* 1 and *out when o is an int in [0, 2**64) (exactly an int: what NcclBuffer and
 * the generated call accept without asking Python), else 0 with no error set. */
static int exact_uint64(PyObject *o, unsigned long long *out) {
  if (!PyLong_CheckExact(o)) return 0;
  unsigned long long v = PyLong_AsUnsignedLongLong(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  *out = v;
  return 1;
}

static int exact_long(PyObject *o, long *out) {
  if (!PyLong_CheckExact(o)) return 0;
  int overflow = 0;
  long v = PyLong_AsLongAndOverflow(o, &overflow);
  if (overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return 0;
  }
  *out = v;
  return 1;
}

/* The ncclDataType_t value of an NcclDataType member. */
static int datatype_value(PyObject *dtype, int *out) {
  if (!PyLong_Check(dtype)) return 0;
  int overflow = 0;
  long v = PyLong_AsLongAndOverflow(dtype, &overflow);
  if (overflow || v < INT_MIN || v > INT_MAX || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return 0;
  }
  *out = (int)v;
  return 1;
}

/* NcclBuffer's fields read here, and where its __slots__ keep them (nbpy_slot_offset, found at the
 * set-up: an NcclBuffer is taken only when its type is exactly buffer_type), -1 for one read as
 * an attribute. Read at their offsets, a call's buffer costs ~100 instructions, not ~1,400. */
enum { BUFFER_PTR, BUFFER_COUNT, BUFFER_DTYPE, BUFFER_DEVICE, BUFFER_READONLY, BUFFER_COMPLEX, BUFFER_FIELDS };
static PyObject *buffer_names[BUFFER_FIELDS];
static Py_ssize_t buffer_offsets[BUFFER_FIELDS];

static inline PyObject *buffer_field(PyObject *buffer, int field) { /* a new reference, or NULL */
  Py_ssize_t offset = buffer_offsets[field];
  return offset >= 0 ? Py_XNewRef(*(PyObject **)((char *)buffer + offset)) : PyObject_GetAttr(buffer, buffer_names[field]);
}

/* An NcclBuffer's fields (out->dtype borrowed); 0 (no error set) when one is not a
 * plain C value: the generated call's conversion then rejects it, in Python. A
 * complex buffer is 0 too: only Python checks the op a complex buffer allows. */
static int read_buffer(PyObject *buffer, nbpy_known_buffer *out) {
  PyObject *ptr = buffer_field(buffer, BUFFER_PTR), *count = buffer_field(buffer, BUFFER_COUNT);
  PyObject *dtype = buffer_field(buffer, BUFFER_DTYPE), *device = buffer_field(buffer, BUFFER_DEVICE);
  PyObject *readonly = buffer_field(buffer, BUFFER_READONLY), *is_complex = buffer_field(buffer, BUFFER_COMPLEX);
  int ok = ptr && count && dtype && device && readonly && is_complex == Py_False && exact_uint64(ptr, &out->ptr) &&
           exact_uint64(count, &out->count) && datatype_value(dtype, &out->datatype) &&
           (device == Py_None || exact_long(device, &out->device));
  if (ok) {
    out->has_device = device != Py_None;
    out->readonly = PyObject_IsTrue(readonly);
    ok = out->readonly >= 0;
  }
  if (ok) out->dtype = dtype; /* an NcclDataType member: alive with its class */
  if (!ok) PyErr_Clear();
  Py_XDECREF(ptr);
  Py_XDECREF(count);
  Py_XDECREF(dtype);
  Py_XDECREF(device);
  Py_XDECREF(readonly);
  Py_XDECREF(is_complex);
  return ok;
}

/* The weak reference's callback, bound to the key: drops the entry if it is still
 * the one holding this reference (a replaced entry's callback must not drop its successor). */
static PyObject *forget(PyObject *key, PyObject *ref) {
  void *address = PyLong_AsVoidPtr(key);
  if (!address && PyErr_Occurred()) return NULL;
  PyObject *entry = table_get(address);
  if (entry && Py_IS_TYPE(entry, &cache_entry_type) && ((cache_entry *)entry)->ref == ref) table_del(address);
  Py_RETURN_NONE;
}

static PyMethodDef forget_def = {"forget", forget, METH_O, NULL};

static int ready(void) {
  if (set_up) return 1;
  PyErr_SetString(PyExc_RuntimeError, "ncclbind.base.buffer has not set up the buffer cache");
  return 0;
}

PyObject *nbpy_buffer_cache_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3 || !PyDict_CheckExact(args[0]) || !PyAnySet_CheckExact(args[1]) || !PyType_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "_buffer_cache_setup(numpy_dtypes: dict, cupy_types: set, buffer_type: type)");
    return NULL;
  }
  if (!s_ptr) {
    if (PyType_Ready(&cache_entry_type) < 0 || PyType_Ready(&entries_type) < 0) return NULL;
    PyObject **names[] = {&s_ptr,   &s_count,        &s_dtype, &s_device, &s_readonly, &s_data_ptr,
                          &s_numel, &s_c_contiguous, &s_num,   &s_data,   &s_size,     &s_device_id, &s_complex};
    const char *texts[] = {"ptr",   "count",         "dtype", "device", "readonly", "data_ptr",
                           "numel", "_c_contiguous", "num",   "data",   "size",     "device_id", "complex"};
    for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
      if (!(*names[i] = PyUnicode_InternFromString(texts[i]))) return NULL;
  }
  Py_XSETREF(numpy_dtypes, Py_NewRef(args[0]));
  Py_XSETREF(cupy_types, Py_NewRef(args[1]));
  Py_XSETREF(buffer_type, (PyTypeObject *)Py_NewRef(args[2]));
  PyObject *const fields[BUFFER_FIELDS] = {s_ptr, s_count, s_dtype, s_device, s_readonly, s_complex};
  for (int i = 0; i < BUFFER_FIELDS; ++i) {
    buffer_names[i] = fields[i];
    buffer_offsets[i] = nbpy_slot_offset(buffer_type, fields[i]);
  }
  set_up = 1;
  return PyType_GenericAlloc(&entries_type, 0);
}

PyObject *nbpy_buffer_cache_remember(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_buffer_cache_remember(obj, buffer, probe)");
    return NULL;
  }
  if (!ready()) return NULL;
  PyObject *obj = args[0];
  int probe = PyObject_IsTrue(args[2]);
  if (probe < 0) return NULL;
  cache_entry *entry = PyObject_New(cache_entry, &cache_entry_type);
  if (!entry) return NULL;
  entry->ref = entry->buffer = entry->known.dtype = NULL;
  entry->probe = probe;
  entry->buffer = Py_NewRef(args[1]);
  if (!read_buffer(args[1], &entry->known)) { /* not C values: left to buffer.py each time */
    Py_DECREF(entry);
    Py_RETURN_NONE;
  }
  Py_INCREF(entry->known.dtype);
  PyObject *key = PyLong_FromVoidPtr(obj); /* id(obj) */
  PyObject *callback = key ? PyCFunction_New(&forget_def, key) : NULL;
  if (callback) entry->ref = PyWeakref_NewRef(obj, callback); /* TypeError: not weakly referenceable */
  int failed = !entry->ref || table_set(obj, (PyObject *)entry) < 0;
  Py_XDECREF(callback);
  Py_XDECREF(key);
  Py_DECREF(entry);
  if (failed) return NULL;
  Py_RETURN_NONE;
}

static int refers_to(PyObject *ref, PyObject *obj) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject *referent = NULL;
  if (PyWeakref_GetRef(ref, &referent) < 0) PyErr_Clear();
  Py_XDECREF(referent); /* obj is alive: only the address is compared */
  return referent == obj;
#else
  return PyWeakref_GET_OBJECT(ref) == obj;
#endif
}

/* obj's live entry, borrowed, or NULL (an error set only if the lookup failed). */
static cache_entry *entry_of(PyObject *obj) {
  PyObject *entry = table_get(obj);
  if (!entry || !Py_IS_TYPE(entry, &cache_entry_type) || !refers_to(((cache_entry *)entry)->ref, obj))
    return NULL; /* absent, or another object's whose id obj now has (its callback is pending) */
  return (cache_entry *)entry;
}

/* The probes' methods of the last probed type (torch.Tensor, or a subclass), looked up on the
 * type once: a probe then calls the method descriptor directly, skipping the generic lookup
 * (the type's MRO and the instance's __dict__, which torch's own C++ methods ignore too). Valid
 * while the type is unchanged: its version tag (which CPython resets when an attribute of the
 * type or a base is set) is the one seen then; else, and for a method that is not a C method
 * descriptor, the probe takes the generic path. */
static PyTypeObject *probe_type;
static unsigned int probe_version;
static PyObject *probe_methods[2]; /* data_ptr, numel: unbound, strong */

static int probe_methods_of(PyTypeObject *tp) {
  if (tp == probe_type && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && tp->tp_version_tag == probe_version)
    return 1;
  Py_CLEAR(probe_methods[0]);
  Py_CLEAR(probe_methods[1]);
  probe_type = NULL;
  PyObject *names[2] = {s_data_ptr, s_numel};
  for (int i = 0; i < 2; ++i) {
    PyObject *method = PyObject_GetAttr((PyObject *)tp, names[i]);
    if (!method) {
      PyErr_Clear(); /* the generic path raises it, as buffer.py's probe would */
      return 0;
    }
    probe_methods[i] = method;
    if (!Py_IS_TYPE(method, &PyMethodDescr_Type)) return 0; /* a Python override: the generic path */
  }
  if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return 0; /* no tag to guard the cache with */
  probe_type = tp;
  probe_version = tp->tp_version_tag;
  return 1;
}

/* obj.method() == value, as `obj.method() == buffer.field` in Python, for exact
 * ints; anything else counts as changed (buffer.py then resolves obj again).
 * which: 0 data_ptr, 1 numel. */
static int probe_equals(PyObject *obj, int which, unsigned long long value) {
  PyObject *result;
  if (!probe_methods_of(Py_TYPE(obj)))
    result = PyObject_VectorcallMethod(which ? s_numel : s_data_ptr, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  else {
    PyMethodDef *def = ((PyMethodDescrObject *)probe_methods[which])->d_method;
    if (def->ml_flags == METH_NOARGS) {
      /* torch's: its C function, called as the descriptor would after checking what is known
       * here (obj's type is the one the method was found on; no arguments), ~30 instructions
       * a probe less */
      if (Py_EnterRecursiveCall(" while probing a cached buffer")) return -1;
      result = def->ml_meth(obj, NULL);
      Py_LeaveRecursiveCall();
    } else
      result = PyObject_Vectorcall(probe_methods[which], &obj, 1, NULL);
  }
  if (!result) return -1;
  unsigned long long v;
  int equal = exact_uint64(result, &v) && v == value;
  Py_DECREF(result);
  return equal;
}

/* 1: the entry holds (no probe, or data_ptr() and numel() unchanged); 0: stale; -1: error. */
static int entry_valid(cache_entry *entry, PyObject *obj) {
  if (!entry->probe) return 1;
  int same = probe_equals(obj, 0, entry->known.ptr);
  if (same == 1) same = probe_equals(obj, 1, entry->known.count);
  return same;
}

PyObject *nbpy_buffer_cache_lookup(PyObject *self, PyObject *obj) {
  (void)self;
  if (!ready()) return NULL;
  cache_entry *entry = entry_of(obj);
  if (!entry) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  Py_INCREF(entry); /* a probe runs Python code, which may drop the entry */
  int valid = entry_valid(entry, obj);
  PyObject *result = valid < 0 ? NULL : Py_NewRef(valid ? entry->buffer : Py_None);
  Py_DECREF(entry);
  return result;
}

/* Read a CuPy array as _from_cupy does: 1, 0 where it would not accept the
 * array as it is (it raises, reads flags, or asks NcclDataType), -1 on an error
 * it would raise too. */
/* The last CuPy array's dtype object and its NcclDataType (a read's dtype.num and map lookup, saved
 * while arrays of one dtype come). */
static PyObject *last_cupy_dtype, *last_nccl_dtype;

static int read_as_cupy(PyObject *a, nbpy_known_buffer *out) {
  PyObject *contiguous = PyObject_GetAttr(a, s_c_contiguous);
  if (!contiguous) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear(); /* _from_cupy reads a.flags then */
    return 0;
  }
  Py_DECREF(contiguous);
  if (contiguous != Py_True) return 0;
  PyObject *dtype = PyObject_GetAttr(a, s_dtype);
  if (!dtype) return -1;
  PyObject *nccl_dtype;
  if (dtype == last_cupy_dtype) { /* NumPy's dtype objects of the builtin types are singletons */
    nccl_dtype = Py_NewRef(last_nccl_dtype);
  }
  else {
    PyObject *num = PyObject_GetAttr(dtype, s_num);
    nccl_dtype = num ? Py_XNewRef(PyDict_GetItemWithError(numpy_dtypes, num)) : NULL;
    Py_XDECREF(num);
    if (nccl_dtype) { /* the pair is kept (strong): dtype's identity stays its own */
      Py_XSETREF(last_cupy_dtype, Py_NewRef(dtype));
      Py_XSETREF(last_nccl_dtype, Py_NewRef(nccl_dtype));
    }
  }
  Py_DECREF(dtype);
  if (!nccl_dtype) return PyErr_Occurred() ? -1 : 0;
  PyObject *memory = PyObject_GetAttr(a, s_data);
  PyObject *ptr = memory ? PyObject_GetAttr(memory, s_ptr) : NULL;
  PyObject *size = ptr ? PyObject_GetAttr(a, s_size) : NULL;
  PyObject *device = size ? PyObject_GetAttr(memory, s_device_id) : NULL;
  int result = -1;
  if (device) /* NcclBuffer's checks: a non-negative int pointer and count, not NULL unless empty */
    result = exact_uint64(ptr, &out->ptr) && exact_uint64(size, &out->count) && (out->ptr || !out->count) &&
             datatype_value(nccl_dtype, &out->datatype) && exact_long(device, &out->device);
  Py_XDECREF(memory);
  Py_XDECREF(ptr);
  Py_XDECREF(size);
  Py_XDECREF(device);
  if (result == 1) {
    out->dtype = nccl_dtype; /* borrowed from here on: the dtype map and the enum class hold it */
    out->has_device = 1;
    out->readonly = 0;
  }
  Py_DECREF(nccl_dtype);
  return result;
}

int nbpy_known_buffer_of(PyObject *obj, nbpy_known_buffer *out) {
  if (!set_up) return 0;
  if (Py_IS_TYPE(obj, buffer_type)) return read_buffer(obj, out); /* read each time: its fields can be set */
  if (Py_TYPE(obj)->tp_weaklistoffset == 0) { /* never cached; maybe a CuPy array */
    int cupy = PySet_Contains(cupy_types, (PyObject *)Py_TYPE(obj));
    return cupy == 1 ? read_as_cupy(obj, out) : cupy;
  }
  cache_entry *entry = entry_of(obj);
  if (!entry) return PyErr_Occurred() ? -1 : 0;
  if (!entry->probe) {
    *out = entry->known;
    return 1;
  }
  Py_INCREF(entry);
  int valid = entry_valid(entry, obj);
  if (valid == 1) *out = entry->known; /* out->dtype: the NcclDataType member, alive with its class */
  Py_DECREF(entry);
  return valid;
}
