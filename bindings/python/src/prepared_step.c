/* Prepared per-step calls of NCCL EP handles (ncclbind.ep.prepare): one call of a handle's
 * dispatch, combine or complete, checked and resolved once by ncclbind/ep/checks.py
 * (prepare_step), made again on every call of the object. The object holds the generated raw
 * function (ncclbind._nccl_ep.dispatch, ...) and its C arguments as Python ints, and a call is
 * one identity comparison and that function called with them. Nothing is checked or refused
 * here: when the handle's routing token is no longer the one the checks held for (update gave
 * new routing, destroy closed it), the call goes to `fallback`, the method with the original
 * arguments, which checks again and raises or runs; an error of the raw call goes through
 * `failed` (checks.failed: callback errors, stale last-error texts, the kernel headers' hint)
 * as the method's would, and a callback error left in `pending` after a call that returned is
 * raised by `raise_pending`, as the method raises it. */
#include "ncclbind_python.h"

#include <structmember.h>

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

static PyMethodDef prepared_step_methods[] = {
    {"_prepare_step", (PyCFunction)(void (*)(void))prepare_step, METH_FASTCALL,
     USAGE "\n--\n\nA PreparedStep: raw(*c_args) on each call while owner.<token_name> is token, else "
           "fallback() (ncclbind/ep/checks.py: prepare_step)."},
    {NULL, NULL, 0, NULL},
};

int nbpy_prepared_step_ready(PyObject *module) {
  if (PyType_Ready(&prepared_step_type) < 0 ||
      PyModule_AddObjectRef(module, "PreparedStep", (PyObject *)&prepared_step_type) < 0)
    return -1;
  return PyModule_AddFunctions(module, prepared_step_methods);
}
