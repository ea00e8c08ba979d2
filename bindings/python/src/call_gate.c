/* The call gate (call_gate.h): its Python type; enter and leave are inline in the header. */
#include "call_gate.h"

#include <errno.h>
#include <time.h>

typedef nbpy_call_gate call_gate;

void nbpy_gate_wake(nbpy_call_gate *gate) {
  pthread_mutex_lock(&gate->lock);
  pthread_cond_broadcast(&gate->left);
  pthread_mutex_unlock(&gate->lock);
}

static PyObject *gate_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  if (PyTuple_GET_SIZE(args) || (kwargs && PyDict_GET_SIZE(kwargs))) {
    PyErr_SetString(PyExc_TypeError, "_CallGate() takes no arguments");
    return NULL;
  }
  call_gate *gate = (call_gate *)type->tp_alloc(type, 0);
  if (!gate) return NULL;
  atomic_init(&gate->inside, 0);
  atomic_init(&gate->closed, 0);
  atomic_init(&gate->taken, 0);
  pthread_mutex_init(&gate->lock, NULL);
  pthread_cond_init(&gate->left, NULL);
  return (PyObject *)gate;
}

static void gate_dealloc(call_gate *gate) {
  pthread_cond_destroy(&gate->left);
  pthread_mutex_destroy(&gate->lock);
  Py_TYPE(gate)->tp_free((PyObject *)gate);
}

/* with gate: ...  (raises NcclInvalid naming comm once closed, as Communicator._live does) */
static PyObject *gate_enter_method(PyObject *self, PyObject *unused) {
  (void)unused;
  if (nbpy_gate_enter(self)) Py_RETURN_NONE;
  PyObject *cls = nbpy_error_class("NcclInvalid");
  if (!cls) return NULL;
  PyObject *exc = PyObject_CallFunction(cls, "ss", "the communicator was destroyed or aborted", "comm");
  Py_DECREF(cls);
  if (exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

static PyObject *gate_exit_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)args;
  (void)nargs;
  nbpy_gate_leave(self);
  Py_RETURN_FALSE;
}

static PyObject *gate_close(PyObject *self, PyObject *unused) {
  (void)unused;
  return PyBool_FromLong(atomic_exchange(&((call_gate *)self)->closed, 1) == 0);
}

static PyObject *gate_take(PyObject *self, PyObject *unused) {
  (void)unused;
  return PyBool_FromLong(atomic_exchange(&((call_gate *)self)->taken, 1) == 0);
}

/* wait(timeout_s=None): True once no call is inside the closed gate; False when timeout_s
 * seconds passed first (abort's grace for the calls already past the gate). */
static PyObject *gate_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  call_gate *gate = (call_gate *)self;
  if (nargs > 1) {
    PyErr_SetString(PyExc_TypeError, "_CallGate.wait takes at most one argument (timeout_s)");
    return NULL;
  }
  double timeout = -1.0;
  if (nargs == 1 && args[0] != Py_None) {
    timeout = PyFloat_AsDouble(args[0]);
    if (timeout == -1.0 && PyErr_Occurred()) return NULL;
    if (!(timeout >= 0.0)) {
      PyErr_SetString(PyExc_ValueError, "_CallGate.wait: timeout_s must be >= 0 or None");
      return NULL;
    }
    if (timeout > 1e9) timeout = -1.0; /* past any deadline a timespec holds: wait without one */
  }
  if (!atomic_load(&gate->closed)) {
    PyErr_SetString(PyExc_RuntimeError, "_CallGate.wait: close the gate first");
    return NULL;
  }
  int empty = 1;
  Py_BEGIN_ALLOW_THREADS
  struct timespec until;
  if (timeout >= 0.0) {
    clock_gettime(CLOCK_REALTIME, &until);
    double whole = (double)(long long)timeout;
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((timeout - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec += 1;
      until.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&gate->lock);
  while (atomic_load(&gate->inside) > 0) {
    if (timeout < 0.0) {
      pthread_cond_wait(&gate->left, &gate->lock);
    } else if (pthread_cond_timedwait(&gate->left, &gate->lock, &until) == ETIMEDOUT) {
      empty = atomic_load(&gate->inside) == 0;
      break;
    }
  }
  pthread_mutex_unlock(&gate->lock);
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(empty);
}

static PyObject *gate_get_closed(PyObject *self, void *unused) {
  (void)unused;
  return PyBool_FromLong(atomic_load(&((call_gate *)self)->closed));
}

static PyObject *gate_get_inside(PyObject *self, void *unused) {
  (void)unused;
  return PyLong_FromLong(atomic_load(&((call_gate *)self)->inside));
}

static PyMethodDef gate_methods[] = {
    {"__enter__", gate_enter_method, METH_NOARGS, "Enter for one NCCL call: NcclInvalid (comm) once closed."},
    {"__exit__", (PyCFunction)(void (*)(void))gate_exit_method, METH_FASTCALL, "Leave after the NCCL call."},
    {"close", gate_close, METH_NOARGS, "Let no call enter any more; True for the first closer only."},
    {"take", gate_take, METH_NOARGS, "Claim the handle to free it; True for the first claimant only."},
    {"wait", (PyCFunction)(void (*)(void))gate_wait, METH_FASTCALL,
     "wait(timeout_s=None): wait (GIL released) until no call is inside a closed gate; False if timeout_s passed first."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef gate_getset[] = {
    {"closed", gate_get_closed, NULL, "Whether calls may no longer enter.", NULL},
    {"inside", gate_get_inside, NULL, "How many calls are inside now.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject nbpy_call_gate_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncclbind._nccl._CallGate",
    .tp_basicsize = sizeof(call_gate),
    .tp_dealloc = (destructor)gate_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = gate_new,
    .tp_methods = gate_methods,
    .tp_getset = gate_getset,
    .tp_doc = "A communicator's call gate: calls enter and leave around NCCL; destroy closes it and waits for "
              "them (see bindings/python/src/call_gate.h).",
};

int nbpy_call_gate_ready(PyObject *module) {
  if (PyType_Ready(&nbpy_call_gate_type) < 0) return -1;
  Py_INCREF(&nbpy_call_gate_type);
  if (PyModule_AddObject(module, "_CallGate", (PyObject *)&nbpy_call_gate_type) < 0) {
    Py_DECREF(&nbpy_call_gate_type);
    return -1;
  }
  return 0;
}
