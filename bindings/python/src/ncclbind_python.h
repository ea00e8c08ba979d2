/* What the generated CPython modules (nccl_module.c, nccl_ep_module.c) use:
 * argument conversion that rejects bad values with NcclInvalid naming the
 * argument, raising NcclError from a result code, and the record (struct
 * mirror) base type. Hand-written; the extension ncclbind._nccl links it with
 * the runtime and the generated C wrappers. */
#ifndef NCCLBIND_PYTHON_H_
#define NCCLBIND_PYTHON_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include <ncclbind/runtime.h>

/* For the fast path's small helpers (call_engine.h, call_gate.h): inlined even into the large
 * generated per-method functions, where GCC would otherwise keep them as calls. */
#if defined(__GNUC__)
#define NBPY_ALWAYS_INLINE __attribute__((always_inline))
#else
#define NBPY_ALWAYS_INLINE
#endif

/* ---- Errors (errors.c) ------------------------------------------------ */

/* Raise the NcclError subclass for a result code returned by `function`
 * (an ncclResult_t or a runtime code; the runtime's or NCCL's last-error text
 * is attached). Returns NULL. */
PyObject *nbpy_raise_result(int code, const char *function);
/* Raise NcclInvalid("function: argument ...") and return NULL. */
PyObject *nbpy_raise_invalid(const char *function, const char *argument, const char *fmt, ...);
/* The exception class ncclbind.errors.<name> (a new reference), or NULL. */
PyObject *nbpy_error_class(const char *name);

/* Where objects of `type` keep the attribute `name`: the offset of its __slots__ member (a
 * writable object slot, read at the offset as the slot's descriptor reads it), or -1 when the
 * type has no such slot (call_engine.c). */
Py_ssize_t nbpy_slot_offset(PyTypeObject *type, PyObject *name);

/* ---- Argument conversion (arguments.c) --------------------------------
 * Each returns 0, or -1 with NcclInvalid set naming function and argument. */

int nbpy_arg_signed_slow(PyObject *o, const char *fn, const char *arg, long long lo, long long hi,
                         long long *out);
int nbpy_arg_unsigned_slow(PyObject *o, const char *fn, const char *arg, unsigned long long hi,
                           unsigned long long *out);
int nbpy_arg_pointer_slow(PyObject *o, const char *fn, const char *arg, void **out);

/* An integer in [lo, hi]; ints and int subclasses (IntEnum members) only, not bool. */
static inline int nbpy_arg_signed(PyObject *o, const char *fn, const char *arg, long long lo,
                                  long long hi, long long *out) {
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow && v >= lo && v <= hi) {
      *out = v;
      return 0;
    }
  }
  return nbpy_arg_signed_slow(o, fn, arg, lo, hi, out);
}

static inline int nbpy_arg_unsigned(PyObject *o, const char *fn, const char *arg,
                                    unsigned long long hi, unsigned long long *out) {
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow && v >= 0 && (unsigned long long)v <= hi) {
      *out = (unsigned long long)v;
      return 0;
    }
  }
  return nbpy_arg_unsigned_slow(o, fn, arg, hi, out);
}

/* An address: an int (0 .. 2**64-1, not bool), or None for NULL; never a record. */
static inline int nbpy_arg_pointer(PyObject *o, const char *fn, const char *arg, void **out) {
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow && v >= 0) {
      *out = (void *)(uintptr_t)v;
      return 0;
    }
  } else if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  return nbpy_arg_pointer_slow(o, fn, arg, out);
}

/* A handle the library dereferences unchecked: an address, not None or 0. */
int nbpy_arg_handle(PyObject *o, const char *fn, const char *arg, void **out);

int nbpy_arg_double(PyObject *o, const char *fn, const char *arg, double *out);
int nbpy_arg_bool(PyObject *o, const char *fn, const char *arg, int *out);

/* Memory an argument points to for the duration of one call. */
typedef struct nbpy_held {
  Py_buffer view;    /* a buffer-protocol object's memory */
  int has_view;
  PyObject *object;  /* a bytes object made from a str */
  void *allocated;   /* a temporary C array, PyMem_Free'd */
} nbpy_held;

#define NBPY_HELD_INIT {.has_view = 0, .object = NULL, .allocated = NULL}
void nbpy_release(nbpy_held *held);

/* A pointer argument: an int address, None (NULL) or a buffer-protocol object
 * (its memory; writable when the callee writes); not a record. */
int nbpy_arg_memory(PyObject *o, const char *fn, const char *arg, int writable, nbpy_held *held,
                    void **out);
/* A C string: str (UTF-8), bytes, or None (NULL). */
int nbpy_arg_string(PyObject *o, const char *fn, const char *arg, nbpy_held *held, const char **out);
/* A sequence argument (or None): its length, within [0, INT_MAX]. */
int nbpy_arg_sequence(PyObject *o, const char *fn, const char *arg, Py_ssize_t *length);
/* A temporary C array of n elements of the given size, zeroed, owned by held. */
void *nbpy_temp_array(nbpy_held *held, Py_ssize_t n, size_t element_size);

/* Result values. */
PyObject *nbpy_from_pointer(const void *p);
PyObject *nbpy_from_string(const char *s); /* None for NULL */

/* ---- Records (records.c) ----------------------------------------------
 * A struct mirror: one Python class per NCCL record, with one C layout per
 * layout variant (ncclConfig_t has two). An instance owns its memory or views
 * memory owned by another object (a parent record, a buffer, an address). */

/* Where the C compiler put one field in one layout (offset -1: a bitfield). */
typedef struct nbpy_field_layout {
  const char *name;
  Py_ssize_t offset;
  Py_ssize_t size;
} nbpy_field_layout;

typedef struct nbpy_record_layout {
  const char *version;        /* first library version with this layout, e.g. "2.28.9" */
  int version_code;           /* e.g. 22809 */
  Py_ssize_t size;
  Py_ssize_t align;
  void (*initialize)(void *); /* the *_INITIALIZER of this layout, or NULL */
  int field_count;
  const nbpy_field_layout *fields;
  const int *version_codes;   /* every header set with exactly this layout, oldest first */
  int version_count;
} nbpy_record_layout;

typedef struct nbpy_record_class {
  PyTypeObject type;                 /* must stay first */
  const char *c_name;                /* "ncclConfig_t" */
  ncclbind_lib lib;
  int layout_count;
  const nbpy_record_layout *layouts; /* oldest first */
  const char *initializer;           /* "NCCL_CONFIG_INITIALIZER" or NULL */
} nbpy_record_class;

typedef struct nbpy_record {
  PyObject_HEAD
  char *data;
  PyObject *owner;      /* keeps viewed memory alive; NULL when the record owns data */
  PyObject *keepalive;  /* dict: field -> object a pointer field points into, or NULL */
  int layout;           /* index into the class's layouts */
  Py_ssize_t exports;   /* live buffer-protocol exports */
} nbpy_record;

extern PyTypeObject nbpy_record_base_type;

#define NBPY_RECORD_CLASS(type_object) ((nbpy_record_class *)(type_object))

/* Ready a generated record class and add it to module. */
int nbpy_record_class_ready(nbpy_record_class *cls, PyObject *module);
/* The layout of cls that a library version code uses: the newest whose first
 * version <= code (the oldest if none). code <= 0: the loaded library's
 * version, or the newest layout when the library cannot be loaded. */
int nbpy_record_layout_for(const nbpy_record_class *cls, int code);
/* A new zeroed record of layout (initialized: the layout's initializer applied). */
PyObject *nbpy_record_new(nbpy_record_class *cls, int layout, int initialized);
/* A record as its initializer fills it for a library of version code (<= 0: the loaded
 * one), in the layout that library uses (nbpy_record_layout_for), stamped with that
 * library's version: the code itself when a header set with this layout has it, else the
 * newest such header set not newer than it (the initializer stamps the newest). */
PyObject *nbpy_record_initialized(nbpy_record_class *cls, int code);
/* A new record holding a copy of the layout's bytes at p. */
PyObject *nbpy_record_copy_of(nbpy_record_class *cls, int layout, const void *p);
/* layout=None | a version code | "X.Y.Z" -> a version code (0 for None). */
int nbpy_version_code_of(PyObject *layout, int *code);
/* A record viewing memory at p, kept alive by owner. */
PyObject *nbpy_record_view(nbpy_record_class *cls, int layout, void *p, PyObject *owner);
/* Raise for a field the record's layout lacks; returns NULL. */
/* The field is not in the layout this record uses: since (and until, "" when no release removed
 * it) name the releases that have it. */
PyObject *nbpy_record_missing_field(nbpy_record *self, const char *field, const char *since, const char *until);
int nbpy_record_missing_field_set(nbpy_record *self, const char *field, const char *since, const char *until);
int nbpy_record_no_delete(const char *field);
/* Remember obj as what pointer field `field` points into (None forgets). */
int nbpy_record_keep(nbpy_record *self, const char *field, PyObject *obj);
/* A record passed by value: an instance of cls, or a bytes-like object of
 * exactly the record's size (held until the call returns). */
int nbpy_arg_record(PyObject *o, nbpy_record_class *cls, const char *fn, const char *arg,
                    nbpy_held *held, void **out);
/* A record-pointer argument: an instance of cls, an int address, None, or a
 * bytes-like object the size of one of the record's layouts (held until the
 * call returns; writable unless the callee takes a const pointer). */
int nbpy_arg_record_pointer(PyObject *o, nbpy_record_class *cls, const char *fn, const char *arg,
                            int writable, nbpy_held *held, void **out);
/* Field setters: a nested record value (same class), and a pointer field that
 * may be set from an int, None, a record or a buffer (kept alive). */
int nbpy_set_record_field(nbpy_record *self, const char *field, PyObject *value,
                          nbpy_record_class *cls, void *dst, size_t size);
int nbpy_set_pointer_field(nbpy_record *self, const char *field, PyObject *value, void **dst);
int nbpy_set_string_field(nbpy_record *self, const char *field, PyObject *value, const char **dst);
int nbpy_set_bytes_field(const char *field, PyObject *value, void *dst, size_t size);

/* ---- Module assembly ------------------------------------------------------ */

/* PyModule_AddObject that always takes value (NULL: an error already set). */
int nbpy_module_add(PyObject *module, const char *name, PyObject *value);

/* Generated; extension.c calls them. */

int nbpy_add_nccl(PyObject *module);
int nbpy_add_nccl_ep(PyObject *module);
/* ncclbind._nccl.PreparedStep, _step_method and _prepare_step (ep_steps.c: the fast
 * path of ncclbind.ep's per-step methods, and ncclbind.ep.prepare). */
int nbpy_ep_steps_ready(PyObject *module);

#endif /* NCCLBIND_PYTHON_H_ */
