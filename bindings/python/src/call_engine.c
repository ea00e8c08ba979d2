/* The one fast path of the buffer-taking methods (see call_engine.h): a method descriptor
 * per row of the generated table, which binds the call's arguments as the method's Python
 * definition does, reads what buffer.py has already resolved, checks what
 * ncclbind/_generated/communicator_methods.py checks, and makes the call. Whatever it does not take goes to the
 * Python definition unchanged, so every rejection and every error text comes from
 * calls.py: this file only ever declines, or calls NCCL. */
#include "call_engine.h"

#include <ncclbind/nccl.h>
#include <structmember.h>

#include "buffer_cache.h"
#include "call_gate.h"

/* ---- what the engine reads, imported or interned at the first install ---- */
static PyObject *red_op_type;   /* NcclRedOp: its members and exact ints are ops as they are */
PyObject *nbpy_sum_op;          /* NcclRedOp.SUM, the Python default */
static PyObject *stream_handle; /* ncclbind.base.streams.stream_handle, for unusual streams */
static PyObject *named_ops;     /* op names ("sum", "MAX") -> what Communicator._op answered */
static PyObject *s_fields[NBPY_COMM_FIELDS], *s_op;  /* interned NBPY_COMM_FIELD_NAMES, NBPY_COMM_OP_METHOD */

/* Communicators under a watchdog (ncclbind/base/watchdog.py): while there are any, every
 * call goes to Python, where the watchdog times it. */
Py_ssize_t nbpy_watched_communicators;

/* _set_path_observer's callable, or NULL: told of each call, (method, made here), while set. The
 * engine keeps no count of its own: whoever asks (a test, the bench's warm-up) counts. */
PyObject *nbpy_path_observer;

/* Tells the observer that a call of `spec` was made here (1) or given to Python (0). Whatever
 * error is set stays set, and an error of the observer's is reported as unraisable: observing never
 * changes a call's outcome. */
void nbpy_observe_path(const nbpy_method_spec *spec, int made) {
  PyObject *observer = nbpy_path_observer;
  if (!observer) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  Py_INCREF(observer);
  PyObject *result = PyObject_CallFunction(observer, "sO", spec->name, made ? Py_True : Py_False);
  if (!result) PyErr_WriteUnraisable(observer);
  Py_XDECREF(result);
  Py_DECREF(observer);
  PyErr_Restore(type, value, traceback);
}

static PyObject *import_attribute(const char *module, const char *name) {
  PyObject *m = PyImport_ImportModule(module);
  if (!m) return NULL;
  PyObject *attribute = PyObject_GetAttrString(m, name);
  Py_DECREF(m);
  return attribute;
}

static int ready(void) {
  if (stream_handle) return 1;
  static const char *const texts[NBPY_COMM_FIELDS] = NBPY_COMM_FIELD_NAMES;
  for (int i = 0; i < NBPY_COMM_FIELDS; ++i)
    if (!s_fields[i] && !(s_fields[i] = PyUnicode_InternFromString(texts[i]))) return 0;
  if (!s_op && !(s_op = PyUnicode_InternFromString(NBPY_COMM_OP_METHOD))) return 0;
  if (!red_op_type && !(red_op_type = import_attribute("ncclbind._generated.nccl_enums", "NcclRedOp"))) return 0;
  if (!nbpy_sum_op && !(nbpy_sum_op = PyObject_GetAttrString(red_op_type, "SUM"))) return 0;
  if (!named_ops && !(named_ops = PyDict_New())) return 0;
  stream_handle = import_attribute("ncclbind.base.streams", "stream_handle");
  return stream_handle != NULL;
}

/* The last stream object and its handle (streams.py remembers the same one), and the last int
 * given as a stream and its value (call_engine.h's nbpy_stream_view): a stream object's handle
 * does not change and an int is immutable, so a loop that passes one pays for stream_handle, or
 * for converting the int, once. The references keep the objects alive, so identity holds. */
nbpy_stream_view nbpy_streams;

/* stream_handle's answer: None and ints here, a stream object (torch, CuPy, __cuda_stream__)
 * from stream_handle itself unless it is the known one. 1: *out is set; 0: declined (a
 * value the generated call would reject); -1: stream_handle raised, as it would first in
 * calls.py. */
static int stream_value(PyObject *stream, void **out) {
  if (stream == Py_None) {
    *out = NULL;
    return 1;
  }
  if (stream == nbpy_streams.object) {
    *out = nbpy_streams.handle;
    return 1;
  }
  if (stream == nbpy_streams.integer) {
    *out = nbpy_streams.value;
    return 1;
  }
  int exact = PyLong_CheckExact(stream);
  PyObject *handle = exact ? Py_NewRef(stream) : PyObject_CallOneArg(stream_handle, stream);
  if (!handle) return -1;
  int overflow = 0;
  long long v = PyLong_CheckExact(handle) ? PyLong_AsLongLongAndOverflow(handle, &overflow) : -1;
  Py_DECREF(handle);
  if (overflow || v < 0) {
    PyErr_Clear();
    return 0;
  }
  *out = (void *)(uintptr_t)v;
  if (exact) {
    Py_XSETREF(nbpy_streams.integer, Py_NewRef(stream));
    nbpy_streams.value = *out;
  } else {
    Py_XSETREF(nbpy_streams.object, Py_NewRef(stream));
    nbpy_streams.handle = *out;
  }
  return 1;
}

/* Where the last communicator type seen keeps its fields, and the int each field held last
 * (call_engine.h's nbpy_comm_view; its inline readers take the common case). */
nbpy_comm_view nbpy_comm;

Py_ssize_t nbpy_slot_offset(PyTypeObject *type, PyObject *name) {
  PyObject *descr = _PyType_Lookup(type, name);
  if (!descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) return -1;
  PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
  return member->type == T_OBJECT_EX && !(member->flags & READONLY) ? member->offset : -1;
}

/* A field of the communicator (a new reference), or NULL (no exception) when it is missing: the
 * slow path of call_engine.h's nbpy_comm_field (an unknown type, or a field read as an attribute). */
PyObject *nbpy_comm_field_slow(PyObject *comm, int field) {
  PyObject *const *names = s_fields;
  if (Py_TYPE(comm) != nbpy_comm.type) {
    for (int i = 0; i < NBPY_COMM_FIELDS; ++i) nbpy_comm.offsets[i] = nbpy_slot_offset(Py_TYPE(comm), names[i]);
    Py_XSETREF(nbpy_comm.type, (PyTypeObject *)Py_NewRef(Py_TYPE(comm)));
  }
  if (nbpy_comm.offsets[field] >= 0) return Py_XNewRef(*(PyObject **)((char *)comm + nbpy_comm.offsets[field]));
  PyObject *value = PyObject_GetAttr(comm, names[field]);
  if (!value) PyErr_Clear();
  return value;
}

long long nbpy_comm_int_slow(PyObject *comm, int field) {
  PyObject *value = nbpy_comm_field_slow(comm, field);
  if (!value) return -1;
  if (value == nbpy_comm.int_seen[field]) {
    Py_DECREF(value);
    return nbpy_comm.int_value[field];
  }
  long long v = PyLong_CheckExact(value) ? PyLong_AsLongLong(value) : -1;
  if (v == -1) PyErr_Clear();
  else {
    nbpy_comm.int_value[field] = v;
    Py_XSETREF(nbpy_comm.int_seen[field], Py_NewRef(value));
  }
  Py_DECREF(value);
  return v;
}

/* The op argument's ncclRedOp_t value, as Communicator._op would answer it (dtype: the
 * buffers' NcclDataType): 1 and *out; 0 declined (a bool, a custom op's value, out of range);
 * -1 Communicator._op's own error, as calls.py would raise it. */
/* The last op given by its value (call_engine.h's nbpy_op_view). */
nbpy_op_view nbpy_op_seen;

int nbpy_op_value(PyObject *comm, PyObject *op, PyObject *dtype, long long *out) {
  if (op == nbpy_op_seen.op) {
    *out = nbpy_op_seen.value;
    return 1;
  }
  PyObject *op_value;
  int as_value = 0; /* an op given by its value: NCCL's own ops only (Communicator._op checks others) */
  if (PyLong_CheckExact(op) || Py_IS_TYPE(op, (PyTypeObject *)red_op_type)) {
    op_value = Py_NewRef(op);
    as_value = 1;
  }
  else if (PyBool_Check(op))
    return 0;
  else if (PyUnicode_CheckExact(op) && (op_value = PyDict_GetItemWithError(named_ops, op)))
    Py_INCREF(op_value); /* a name Communicator._op has answered before: names are fixed */
  else if (PyErr_Occurred() || !(op_value = PyObject_CallMethodObjArgs(comm, s_op, op, dtype, NULL)))
    return -1;
  else if (PyUnicode_CheckExact(op) && PyDict_SetItem(named_ops, op, op_value) < 0) {
    Py_DECREF(op_value);
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(op_value, &overflow);
  Py_DECREF(op_value);
  if (overflow || (v == -1 && PyErr_Occurred()) || v < INT32_MIN || v > UINT32_MAX) {
    PyErr_Clear();
    return 0;
  }
  if (as_value && (v < 0 || v >= nb_ncclNumOps)) return 0; /* a custom op's value, or none */
  if (as_value) {
    Py_XSETREF(nbpy_op_seen.op, Py_NewRef(op));
    nbpy_op_seen.value = v;
  }
  *out = v;
  return 1;
}

/* Make the call of resolved values: 1: made; 0: declined (the communicator's gate is gone or
 * closed: calls.py raises); -2: NCCL's error (raised). The gate last: what ran before
 * (stream_handle, Communicator._op) may have let another thread destroy the communicator.
 * Entered, the handle stays NCCL's until the call left. */
/* ---- the method descriptor (nbpy_fast_method, call_engine.h) ----
 * Its vectorcall is the method's own (method_table.c: call_resolve.h's nbpy_method_vectorcall
 * over the method's row); what the fast path does not make comes here. */

PyObject *nbpy_method_declined(nbpy_fast_method *self, int made, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
  if (nbpy_path_observer) nbpy_observe_path(self->spec, 0); /* given to Python, or an error Python would raise too */
  if (made < 0) return NULL;
  return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
}

static PyObject *fast_method_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (obj == NULL || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

static void fast_method_dealloc(nbpy_fast_method *self) {
  Py_XDECREF(self->python);
  for (int i = 0; i < NBPY_MAX_METHOD_ARGS; ++i) Py_XDECREF(self->names[i]);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *fast_method_repr(nbpy_fast_method *self) {
  return PyUnicode_FromFormat("<method %s (ncclbind fast path over %s)>", self->spec->name, self->spec->function);
}

/* __doc__, __name__, __qualname__ and __module__ are the Python definition's, and so is
 * any attribute this type lacks (__defaults__, __annotations__, ...). */
PyObject *nbpy_definition_getattro(PyObject *self, PyObject *name, PyObject *python) {
  static const char *const forwarded[] = {"__doc__", "__name__", "__qualname__", "__module__"};
  for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; ++i)
    if (PyUnicode_CompareWithASCIIString(name, forwarded[i]) == 0) return PyObject_GetAttr(python, name);
  PyObject *found = PyObject_GenericGetAttr(self, name);
  if (found || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();
  return PyObject_GetAttr(python, name);
}

static PyObject *fast_method_getattro(PyObject *self, PyObject *name) {
  return nbpy_definition_getattro(self, name, ((nbpy_fast_method *)self)->python);
}

static PyMemberDef fast_method_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(nbpy_fast_method, python), READONLY,
     "The method's Python definition (the reference; every call the fast path does not take)."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject fast_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.FastMethod",
    .tp_basicsize = sizeof(nbpy_fast_method),
    .tp_dealloc = (destructor)fast_method_dealloc,
    .tp_repr = (reprfunc)fast_method_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = fast_method_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(nbpy_fast_method, vectorcall),
    .tp_descr_get = fast_method_get,
    .tp_members = fast_method_members,
    .tp_doc = "A method of a spec row (policy): the C fast path, else its Python definition.",
};

PyObject *nbpy_install_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_install_method(name: str, python_definition, /)");
    return NULL;
  }
  if (!ready()) return NULL;
  const char *name = PyUnicode_AsUTF8(args[0]);
  if (!name) return NULL;
  for (size_t i = 0; i < nbpy_method_spec_count; ++i) {
    if (strcmp(nbpy_method_specs[i]->name, name) != 0) continue;
    nbpy_fast_method *m = PyObject_New(nbpy_fast_method, &fast_method_type);
    if (!m) return NULL;
    m->spec = nbpy_method_specs[i];
    m->python = Py_NewRef(args[1]);
    m->vectorcall = m->spec->vectorcall;
    for (int a = 0; a < NBPY_MAX_METHOD_ARGS; ++a) m->names[a] = NULL;
    for (int a = 0; a < m->spec->nargs; ++a)
      if (!(m->names[a] = PyUnicode_InternFromString(m->spec->arguments[a]))) {
        Py_DECREF(m);
        return NULL;
      }
    return (PyObject *)m;
  }
  return PyErr_Format(PyExc_KeyError, "no method %s in the generated method table", name);
}

/* ---- prepared calls (ncclbind.prepare) ---- */

/* One call of a method, bound, checked and resolved once (ncclbind/base/calls.py: prepare), made
 * again on every call of the object: the values are kept in C, so a call is the communicator's
 * handle compared, its gate entered and the trampoline called. What a call of the method would
 * check again and could find changed (the communicator destroyed, a watchdog on it) sends the
 * call to `fallback`, the method with the original arguments, which raises or runs it as usual. */
typedef struct prepared_call {
  PyObject_HEAD
  const nbpy_method_spec *spec;
  PyObject *comm;
  PyObject *values;   /* the resolved arguments (NcclBuffers, ints, the config record) */
  PyObject *fallback; /* method(*args, **kwargs), called with no arguments */
  nbpy_call_values v;
  nbpy_trampoline call;
  vectorcallfunc vectorcall;
} prepared_call;

static PyObject *prepared_call_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                          PyObject *kwnames) {
  prepared_call *self = (prepared_call *)callable;
  (void)args;
  if (PyVectorcall_NARGS(nargsf) || (kwnames && PyTuple_GET_SIZE(kwnames))) {
    PyErr_Format(PyExc_TypeError, "a prepared %s takes no arguments (they were given to ncclbind.prepare)",
                 self->spec->name);
    return NULL;
  }
  int made = 0;
  if (!nbpy_watched_communicators && nbpy_comm_int(self->comm, NBPY_COMM_HANDLE) == (long long)(uintptr_t)self->v.comm)
    made = nbpy_issue_call(self->spec, self->comm, &self->v, self->call);
  if (made > 0) Py_RETURN_NONE;
  if (made == -2) return NULL;
  if (nbpy_path_observer) nbpy_observe_path(self->spec, 0);
  return PyObject_CallNoArgs(self->fallback);
}

static int prepared_call_traverse(prepared_call *self, visitproc visit, void *arg) {
  Py_VISIT(self->comm);
  Py_VISIT(self->values);
  Py_VISIT(self->fallback);
  return 0;
}

static int prepared_call_clear(prepared_call *self) {
  Py_CLEAR(self->comm);
  Py_CLEAR(self->values);
  Py_CLEAR(self->fallback);
  return 0;
}

static void prepared_call_dealloc(prepared_call *self) {
  PyObject_GC_UnTrack(self);
  prepared_call_clear(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *prepared_call_repr(prepared_call *self) {
  return PyUnicode_FromFormat("<prepared %s (%s, count %llu) on %R>", self->spec->name,
                              self->v.config ? self->spec->config_function : self->spec->function,
                              self->v.count, self->comm);
}

static PyMemberDef prepared_call_members[] = {
    {"communicator", T_OBJECT_EX, offsetof(prepared_call, comm), READONLY, "The communicator it calls on."},
    {"arguments", T_OBJECT_EX, offsetof(prepared_call, values), READONLY,
     "The resolved arguments, by name (buffers as NcclBuffer, op, root/peer and stream as ints)."},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *prepared_call_get_count(prepared_call *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->v.count);
}

static PyObject *prepared_call_get_name(prepared_call *self, void *closure) {
  (void)closure;
  return PyUnicode_FromString(self->spec->name);
}

static PyGetSetDef prepared_call_getset[] = {
    {"count", (getter)prepared_call_get_count, NULL, "The element count NCCL is given.", NULL},
    {"method", (getter)prepared_call_get_name, NULL, "The method's name (all_reduce, send, ...).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject prepared_call_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.PreparedCall",
    .tp_basicsize = sizeof(prepared_call),
    .tp_dealloc = (destructor)prepared_call_dealloc,
    .tp_repr = (reprfunc)prepared_call_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_vectorcall_offset = offsetof(prepared_call, vectorcall),
    .tp_traverse = (traverseproc)prepared_call_traverse,
    .tp_clear = (inquiry)prepared_call_clear,
    .tp_members = prepared_call_members,
    .tp_getset = prepared_call_getset,
    .tp_doc = "One call of a communicator method, checked and resolved once (ncclbind.prepare); call it with no "
              "arguments to make it again.",
};

/* _prepare_call(method, comm, values, fallback): method is a FastMethod (the class attribute),
 * values the arguments by name as calls.py resolved and checked them. */
static PyObject *prepare_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 4 || !Py_IS_TYPE(args[0], &fast_method_type) || !PyDict_Check(args[2]) || !PyCallable_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "_prepare_call(method: FastMethod, comm, values: dict, fallback, /)");
    return NULL;
  }
  if (!ready()) return NULL;
  nbpy_fast_method *m = (nbpy_fast_method *)args[0];
  const nbpy_method_spec *spec = m->spec;
  PyObject *bound[NBPY_MAX_METHOD_ARGS];
  for (int i = 0; i < spec->nargs; ++i) {
    PyObject *value = PyDict_GetItemString(args[2], spec->arguments[i]);
    if (!value) value = spec->defaults[i] == NBPY_DEFAULT_SUM ? nbpy_sum_op : Py_None;
    bound[i] = value; /* borrowed: the dict holds them */
  }
  prepared_call *p = PyObject_GC_New(prepared_call, &prepared_call_type);
  if (!p) return NULL;
  p->spec = spec;
  p->comm = Py_NewRef(args[1]);
  p->values = Py_NewRef(args[2]);
  p->fallback = Py_NewRef(args[3]);
  p->vectorcall = prepared_call_vectorcall;
  int resolved = spec->resolve(args[1], bound, &p->v, &p->call);
  PyObject_GC_Track(p);
  if (resolved < 0) {
    Py_DECREF(p);
    return NULL;
  }
  if (resolved == 0) {
    Py_DECREF(p);
    return PyErr_Format(PyExc_RuntimeError,
                        "ncclbind.prepare: the C path did not take %s's checked arguments (a buffer or "
                        "config it cannot read); call the method instead",
                        spec->name);
  }
  return (PyObject *)p;
}

int nbpy_stream_value(PyObject *stream, void **out) {
  return ready() ? stream_value(stream, out) : -1;
}

static PyObject *set_path_observer(PyObject *self, PyObject *observer) {
  (void)self;
  if (observer != Py_None && !PyCallable_Check(observer)) {
    PyErr_Format(PyExc_TypeError, "_set_path_observer(observer): a callable or None, not %s", Py_TYPE(observer)->tp_name);
    return NULL;
  }
  PyObject *previous = nbpy_path_observer ? nbpy_path_observer : Py_NewRef(Py_None);
  nbpy_path_observer = observer == Py_None ? NULL : Py_NewRef(observer);
  return previous;
}

static PyObject *set_watched_communicators(PyObject *self, PyObject *arg) {
  (void)self;
  Py_ssize_t n = PyLong_AsSsize_t(arg);
  if (n == -1 && PyErr_Occurred()) return NULL;
  nbpy_watched_communicators = n;
  Py_RETURN_NONE;
}

/* What the fast path reads of a communicator, as compiled: for the test that holds it to
 * base/comm_interface.py (its one declaration). */
static PyObject *comm_interface(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  static const char *const texts[NBPY_COMM_FIELDS] = NBPY_COMM_FIELD_NAMES;
  PyObject *fields = PyTuple_New(NBPY_COMM_FIELDS);
  if (!fields) return NULL;
  for (int i = 0; i < NBPY_COMM_FIELDS; ++i) {
    PyObject *name = PyUnicode_FromString(texts[i]);
    if (!name) {
      Py_DECREF(fields);
      return NULL;
    }
    PyTuple_SET_ITEM(fields, i, name);
  }
  return Py_BuildValue("(Ns)", fields, NBPY_COMM_OP_METHOD);
}

static PyMethodDef engine_methods[] = {
    {"_comm_interface", comm_interface, METH_NOARGS,
     "_comm_interface()\n--\n\n(the communicator slots the C fast path reads, in its order; the method it "
     "calls for an op),\nas compiled (base/comm_interface.py declares them)."},
    {"_set_watched_communicators", set_watched_communicators, METH_O,
     "_set_watched_communicators(n, /)\n--\n\nHow many communicators have a watchdog (their calls skip the fast path)."},
    {"_install_method", (PyCFunction)(void (*)(void))nbpy_install_method, METH_FASTCALL,
     "_install_method(name, python_definition, /)\n--\n\nThe method descriptor for a row of the generated method "
     "table: the C fast path,\nelse python_definition (called as it was)."},
    {"_prepare_call", (PyCFunction)(void (*)(void))prepare_call, METH_FASTCALL,
     "_prepare_call(method, comm, values, fallback, /)\n--\n\nA PreparedCall of a FastMethod with arguments "
     "calls.py has checked\nand resolved (ncclbind.prepare)."},
    {"_set_path_observer", set_path_observer, METH_O,
     "_set_path_observer(observer, /)\n--\n\nobserver(method, made) is called for each call of a fast-path method or "
     "prepared\ncall while set: made is True when the C fast path made it, False when it went\nto the Python "
     "definition. None unsets it. Returns the previous observer (or None).\nFor tests and the bench's warm-up: "
     "an observed call pays for a Python call."},
    {NULL, NULL, 0, NULL},
};

int nbpy_call_engine_ready(PyObject *module) {
  if (PyType_Ready(&fast_method_type) < 0 || PyType_Ready(&prepared_call_type) < 0 ||
      nbpy_call_gate_ready(module) < 0 || PyModule_AddObjectRef(module, "PreparedCall", (PyObject *)&prepared_call_type) < 0)
    return -1;
  return PyModule_AddFunctions(module, engine_methods);
}
