/* The per-step calls of NCCL EP handles (dispatch, combine, complete: the spec's methods whose
 * arguments are all immutable records), in C: the methods' fast path and ncclbind.ep.prepare's
 * steps. Neither checks or refuses anything; both make the call the generated method has already
 * checked, through the generated raw function (ncclbind._nccl_ep.dispatch, ...), and give every
 * other call to Python.
 *
 * StepMethod: the method on ep.Handle. Its Python definition (ncclbind/ep/_generated/methods.py)
 * keeps the last call's checks in the handle (_last_dispatch: the routing token, the record
 * objects, their addresses) and reuses them while the same objects come again on the same
 * routing; this descriptor does that in C: it binds the call's arguments as the definition's
 * signature does, compares them with the cache by identity, resolves the stream as the
 * collectives' fast path does, and calls. Any other call (first call, new records, new routing,
 * a destroyed handle, unusual arguments) goes to the Python definition as it came.
 *
 * PreparedStep (ncclbind.ep.prepare): one call of such a method, checked and resolved once by the
 * method's generated checks (ep/prepared.py), made again on every call of the object: it holds the
 * raw function and its C arguments as ints; a call is one identity comparison and that function called with them.
 * When the handle's routing token is no longer the one the checks held for (update gave new
 * routing, destroy closed it), the call goes to `fallback`, the method with the original
 * arguments, which checks again and raises or runs.
 *
 * For both: an error of the raw call goes through `failed` (ep/base/checks.py: failed: callback errors,
 * stale last-error texts, the kernel headers' hint) as the definition's would, and a callback
 * error left in `pending` after a call that returned is raised by `raise_pending`. */
#include "ncclbind_python.h"

#include "call_engine.h"

#include <structmember.h>

/* The raw call's exception, given to failed(error): if failed raises (a callback's exception,
 * with error as its cause), that one propagates; else error does. */
static PyObject *reraise_through(PyObject *failed) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *error = PyErr_GetRaisedException();
  PyObject *r = PyObject_CallOneArg(failed, error);
  if (!r) {
    Py_DECREF(error);
    return NULL;
  }
  Py_DECREF(r);
  PyErr_SetRaisedException(error);
#else
  PyObject *type, *error, *traceback;
  PyErr_Fetch(&type, &error, &traceback);
  PyErr_NormalizeException(&type, &error, &traceback);
  if (traceback) PyException_SetTraceback(error, traceback);
  PyObject *r = PyObject_CallOneArg(failed, error);
  if (!r) {
    Py_XDECREF(type);
    Py_XDECREF(error);
    Py_XDECREF(traceback);
    return NULL;
  }
  Py_DECREF(r);
  PyErr_Restore(type, error, traceback);
#endif
  return NULL;
}

/* ---- the methods' fast path ---- */

#define MAX_STEP_ARGUMENTS 8

typedef struct step_method {
  PyObject_HEAD
  PyObject *python;        /* the Python definition: every call not taken here */
  PyObject *raw;           /* the generated function of ncclbind._nccl_ep */
  PyObject *cache;         /* the handle's attribute with the last call's checks ("_last_dispatch") */
  PyObject *names;         /* tuple: the arguments in the signature's order, then "stream" */
  Py_ssize_t npositional;  /* the leading arguments that may come positionally (required) */
  Py_ssize_t nargs;        /* the records and configs: len(names) - 1 (the others default to None) */
  PyObject *failed;        /* checks.failed(error) */
  PyObject *pending;       /* checks.pending */
  PyObject *raise_pending; /* checks.raise_pending() */
  PyObject *stream_object; /* the last stream object (not None, not an int) and its handle as an int */
  PyObject *stream_int;
  unsigned long long made, declined;
  vectorcallfunc vectorcall;
} step_method;

static PyObject *s_routing, *s_handle, *zero;

/* bound[0 .. nargs] the arguments and the stream, as the definition's signature binds them (a
 * keyword-only one not given is None); 0 when the signature would not bind them (Python raises). */
static int bind_step(step_method *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                     PyObject **bound) {
  Py_ssize_t n = self->nargs + 1;
  if (nargs < 1 || nargs - 1 > self->npositional) return 0;
  for (Py_ssize_t i = 0; i < n; ++i) bound[i] = i < nargs - 1 ? args[i + 1] : NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t slot = -1;
    for (Py_ssize_t i = 0; i < n && slot < 0; ++i) /* a call site's keywords are interned */
      if (name == PyTuple_GET_ITEM(self->names, i)) slot = i;
    for (Py_ssize_t i = 0; i < n && slot < 0; ++i)
      if (PyUnicode_Compare(name, PyTuple_GET_ITEM(self->names, i)) == 0) slot = i;
    if (slot < 0 || bound[slot]) return 0; /* unknown, or given twice */
    bound[slot] = args[nargs + k];
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    if (i < self->npositional) return 0; /* a required argument missing */
    bound[i] = Py_None;
  }
  return 1;
}

/* The call, if the handle's cache holds for these objects on its routing: 1 made (result set,
 * or NULL with the error raised), 0 not taken. */
static int step_call(step_method *self, PyObject *handle, PyObject **bound, PyObject **result) {
  Py_ssize_t n = self->nargs;
  PyObject *last = PyObject_GetAttr(handle, self->cache);
  PyObject *routing = last ? PyObject_GetAttr(handle, s_routing) : NULL;
  PyObject *address = routing ? PyObject_GetAttr(handle, s_handle) : NULL;
  PyObject *stream = NULL;
  int taken = address && PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == 1 + 2 * n &&
              PyTuple_GET_ITEM(last, 0) == routing;
  for (Py_ssize_t i = 0; taken && i < n; ++i) taken = PyTuple_GET_ITEM(last, 1 + i) == bound[i];
  PyObject *given = bound[n];
  if (taken && (given == Py_None || PyLong_CheckExact(given))) {
    stream = Py_NewRef(given == Py_None ? zero : given); /* the raw function reads the int as it is */
  } else if (taken && given == self->stream_object) {
    stream = Py_NewRef(self->stream_int); /* a stream object's handle does not change */
  } else if (taken) {
    void *value = NULL;
    taken = nbpy_stream_value(given, &value) == 1 && (stream = PyLong_FromVoidPtr(value)) != NULL;
    if (taken) {
      Py_XSETREF(self->stream_object, Py_NewRef(given));
      Py_XSETREF(self->stream_int, Py_NewRef(stream));
    }
  }
  if (!taken) PyErr_Clear(); /* an attribute or a stream Python reads again, and raises on */
  if (taken) {
    PyObject *c_args[MAX_STEP_ARGUMENTS + 2];
    c_args[0] = address;
    for (Py_ssize_t i = 0; i < n; ++i) c_args[1 + i] = PyTuple_GET_ITEM(last, 1 + n + i);
    c_args[1 + n] = stream;
    *result = PyObject_Vectorcall(self->raw, c_args, (size_t)(n + 2), NULL);
  }
  Py_XDECREF(last);
  Py_XDECREF(routing);
  Py_XDECREF(address);
  Py_XDECREF(stream);
  return taken;
}

static PyObject *step_method_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                        PyObject *kwnames) {
  step_method *self = (step_method *)callable;
  PyObject *bound[MAX_STEP_ARGUMENTS + 1];
  PyObject *result = NULL;
  if (!bind_step(self, args, PyVectorcall_NARGS(nargsf), kwnames, bound) || !step_call(self, args[0], bound, &result)) {
    ++self->declined;
    return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
  }
  ++self->made;
  if (!result) return reraise_through(self->failed);
  if (PyList_GET_SIZE(self->pending)) {
    Py_DECREF(result);
    return PyObject_CallNoArgs(self->raise_pending);
  }
  return result;
}

static PyObject *step_method_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (obj == NULL || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

static PyObject *step_method_getattro(PyObject *self, PyObject *name) {
  return nbpy_definition_getattro(self, name, ((step_method *)self)->python);
}

static void step_method_dealloc(step_method *self) {
  Py_XDECREF(self->python);
  Py_XDECREF(self->raw);
  Py_XDECREF(self->cache);
  Py_XDECREF(self->names);
  Py_XDECREF(self->failed);
  Py_XDECREF(self->pending);
  Py_XDECREF(self->raise_pending);
  Py_XDECREF(self->stream_object);
  Py_XDECREF(self->stream_int);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *step_method_repr(step_method *self) {
  return PyUnicode_FromFormat("<method %S (ncclbind.ep fast path)>", self->python);
}

static PyMemberDef step_method_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(step_method, python), READONLY,
     "The method's Python definition (the reference; every call the fast path does not take)."},
    {"made", T_ULONGLONG, offsetof(step_method, made), READONLY, "Calls the fast path made."},
    {"declined", T_ULONGLONG, offsetof(step_method, declined), READONLY, "Calls it gave to the Python definition."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject step_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.StepMethod",
    .tp_basicsize = sizeof(step_method),
    .tp_dealloc = (destructor)step_method_dealloc,
    .tp_repr = (reprfunc)step_method_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = step_method_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(step_method, vectorcall),
    .tp_descr_get = step_method_get,
    .tp_members = step_method_members,
    .tp_doc = "A per-step method of ep.Handle: the C fast path, else its Python definition.",
};

#define STEP_USAGE                                                                                        \
  "_step_method(python_definition, raw, cache: str, names: tuple[str, ...], npositional: int, failed, " \
  "pending: list, raise_pending, /)"

static PyObject *make_step_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  Py_ssize_t npositional = nargs == 8 ? PyLong_AsSsize_t(args[4]) : -1;
  if (npositional == -1 && PyErr_Occurred()) return NULL;
  if (nargs != 8 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1]) || !PyUnicode_Check(args[2]) ||
      !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) < 1 || PyTuple_GET_SIZE(args[3]) > MAX_STEP_ARGUMENTS + 1 ||
      npositional < 0 || npositional >= PyTuple_GET_SIZE(args[3]) || !PyCallable_Check(args[5]) ||
      !PyList_Check(args[6]) || !PyCallable_Check(args[7])) {
    PyErr_SetString(PyExc_TypeError, STEP_USAGE);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[3]); ++i)
    if (!PyUnicode_Check(PyTuple_GET_ITEM(args[3], i))) {
      PyErr_SetString(PyExc_TypeError, STEP_USAGE);
      return NULL;
    }
  step_method *m = PyObject_New(step_method, &step_method_type);
  if (!m) return NULL;
  m->python = Py_NewRef(args[0]);
  m->raw = Py_NewRef(args[1]);
  m->cache = Py_NewRef(args[2]);
  m->names = Py_NewRef(args[3]);
  m->npositional = npositional;
  m->nargs = PyTuple_GET_SIZE(args[3]) - 1;
  m->failed = Py_NewRef(args[5]);
  m->pending = Py_NewRef(args[6]);
  m->raise_pending = Py_NewRef(args[7]);
  m->stream_object = m->stream_int = NULL;
  m->made = m->declined = 0;
  m->vectorcall = step_method_vectorcall;
  PyUnicode_InternInPlace(&m->cache);
  return (PyObject *)m;
}


/* ---- prepared steps (ncclbind.ep.prepare) ---- */

typedef struct prepared_step {
  PyObject_HEAD
  PyObject *raw;           /* the generated function of ncclbind._nccl_ep */
  PyObject *args;          /* tuple: its C arguments, as ints */
  PyObject *owner;         /* the ep.Handle */
  PyObject *token_name;    /* the owner's attribute holding its routing token ("_routing") */
  PyObject *token;         /* the token the checks held for */
  PyObject *fallback;      /* method(*args, **kwargs), called with no arguments */
  PyObject *failed;        /* checks.failed(error) */
  PyObject *pending;       /* checks.pending: a list, non-empty after a callback raised */
  PyObject *raise_pending; /* checks.raise_pending() */
  PyObject *method;        /* the method's name */
  PyObject *keep;          /* what the C arguments point into (records, tensors), and the arguments */
  vectorcallfunc vectorcall;
} prepared_step;

static PyObject *prepared_step_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                          PyObject *kwnames) {
  prepared_step *self = (prepared_step *)callable;
  (void)args;
  if (PyVectorcall_NARGS(nargsf) || (kwnames && PyTuple_GET_SIZE(kwnames))) {
    PyErr_Format(PyExc_TypeError, "a prepared %U takes no arguments (they were given to ncclbind.ep.prepare)",
                 self->method);
    return NULL;
  }
  PyObject *token = PyObject_GetAttr(self->owner, self->token_name);
  if (!token) return NULL;
  int same = token == self->token;
  Py_DECREF(token);
  if (!same) return PyObject_CallNoArgs(self->fallback);
  PyObject *result = PyObject_Vectorcall(self->raw, &PyTuple_GET_ITEM(self->args, 0), PyTuple_GET_SIZE(self->args), NULL);
  if (!result) return reraise_through(self->failed);
  if (PyList_GET_SIZE(self->pending)) {
    Py_DECREF(result);
    return PyObject_CallNoArgs(self->raise_pending);
  }
  return result;
}

static int prepared_step_traverse(prepared_step *self, visitproc visit, void *arg) {
  Py_VISIT(self->raw);
  Py_VISIT(self->args);
  Py_VISIT(self->owner);
  Py_VISIT(self->token_name);
  Py_VISIT(self->token);
  Py_VISIT(self->fallback);
  Py_VISIT(self->failed);
  Py_VISIT(self->pending);
  Py_VISIT(self->raise_pending);
  Py_VISIT(self->method);
  Py_VISIT(self->keep);
  return 0;
}

static int prepared_step_clear(prepared_step *self) {
  Py_CLEAR(self->raw);
  Py_CLEAR(self->args);
  Py_CLEAR(self->owner);
  Py_CLEAR(self->token_name);
  Py_CLEAR(self->token);
  Py_CLEAR(self->fallback);
  Py_CLEAR(self->failed);
  Py_CLEAR(self->pending);
  Py_CLEAR(self->raise_pending);
  Py_CLEAR(self->method);
  Py_CLEAR(self->keep);
  return 0;
}

static void prepared_step_dealloc(prepared_step *self) {
  PyObject_GC_UnTrack(self);
  prepared_step_clear(self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *prepared_step_repr(prepared_step *self) {
  return PyUnicode_FromFormat("<prepared %U on %R>", self->method, self->owner);
}

static PyMemberDef prepared_step_members[] = {
    {"owner", T_OBJECT_EX, offsetof(prepared_step, owner), READONLY, "The ep.Handle it calls on."},
    {"method", T_OBJECT_EX, offsetof(prepared_step, method), READONLY, "The method's name (dispatch, ...)."},
    {"c_arguments", T_OBJECT_EX, offsetof(prepared_step, args), READONLY,
     "The C arguments NCCL EP is given, as ints (the handle, the records' addresses, the stream)."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject prepared_step_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl.PreparedStep",
    .tp_basicsize = sizeof(prepared_step),
    .tp_dealloc = (destructor)prepared_step_dealloc,
    .tp_repr = (reprfunc)prepared_step_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_vectorcall_offset = offsetof(prepared_step, vectorcall),
    .tp_traverse = (traverseproc)prepared_step_traverse,
    .tp_clear = (inquiry)prepared_step_clear,
    .tp_members = prepared_step_members,
    .tp_doc = "One call of an NCCL EP handle's per-step method, checked and resolved once (ncclbind.ep.prepare); "
              "call it with no arguments to make it again.",
};

#define USAGE                                                                                          \
  "_prepare_step(raw, c_args: tuple, owner, token_name: str, token, fallback, failed, pending: list, " \
  "raise_pending, method: str, keep, /)"

static PyObject *prepare_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 11 || !PyCallable_Check(args[0]) || !PyTuple_Check(args[1]) || !PyUnicode_Check(args[3]) ||
      !PyCallable_Check(args[5]) || !PyCallable_Check(args[6]) || !PyList_Check(args[7]) ||
      !PyCallable_Check(args[8]) || !PyUnicode_Check(args[9])) {
    PyErr_SetString(PyExc_TypeError, USAGE);
    return NULL;
  }
  prepared_step *p = PyObject_GC_New(prepared_step, &prepared_step_type);
  if (!p) return NULL;
  PyObject **fields[] = {&p->raw,    &p->args,    &p->owner,   &p->token_name,    &p->token, &p->fallback,
                         &p->failed, &p->pending, &p->raise_pending, &p->method, &p->keep};
  for (Py_ssize_t i = 0; i < nargs; ++i) *fields[i] = Py_NewRef(args[i]);
  p->vectorcall = prepared_step_vectorcall;
  PyObject_GC_Track(p);
  return (PyObject *)p;
}

static PyMethodDef ep_step_functions[] = {
    {"_step_method", (PyCFunction)(void (*)(void))make_step_method, METH_FASTCALL,
     STEP_USAGE "\n--\n\nA StepMethod: the fast path of a per-step method of ep.Handle over its Python "
                "definition (ncclbind/ep/_generated/methods.py installs them)."},
    {"_prepare_step", (PyCFunction)(void (*)(void))prepare_step, METH_FASTCALL,
     USAGE "\n--\n\nA PreparedStep: raw(*c_args) on each call while owner.<token_name> is token, else "
           "fallback() (ncclbind/ep/prepared.py: prepare)."},
    {NULL, NULL, 0, NULL},
};

int nbpy_ep_steps_ready(PyObject *module) {
  if (!s_routing && !(s_routing = PyUnicode_InternFromString("_routing"))) return -1;
  if (!s_handle && !(s_handle = PyUnicode_InternFromString("_handle"))) return -1;
  if (!zero && !(zero = PyLong_FromLong(0))) return -1;
  if (PyType_Ready(&step_method_type) < 0 || PyType_Ready(&prepared_step_type) < 0 ||
      PyModule_AddObjectRef(module, "PreparedStep", (PyObject *)&prepared_step_type) < 0)
    return -1;
  return PyModule_AddFunctions(module, ep_step_functions);
}
