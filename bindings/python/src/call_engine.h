/* The fast path of the Pythonic methods that take buffers (Communicator.all_reduce, send,
 * ..., one per entry of the spec files in policy). Each method is a descriptor
 * (call_engine.c) over one row of the generated table (src/generated/method_table.c):
 * the row says, as data, what each argument means; the engine reads the buffers that
 * ncclbind/base/buffer.py has already resolved (buffer_cache.h), checks what
 * ncclbind/_generated/communicator_methods.py checks and makes the call through the row's trampoline. Anything
 * it does not take (an unknown buffer, a failed check, an unusual argument) goes, as it
 * came, to the method's Python definition, which resolves, checks and raises: no
 * rejection is decided in C. */
#ifndef NCCLBIND_CALL_ENGINE_H_
#define NCCLBIND_CALL_ENGINE_H_

#include "ncclbind_python.h"

#include <ncclbind/nccl.h>

#include "call_gate.h"

#define NBPY_MAX_METHOD_ARGS 8
#define NBPY_MAX_METHOD_BUFFERS 2

enum nbpy_default { NBPY_REQUIRED, NBPY_DEFAULT_NONE, NBPY_DEFAULT_SUM };

/* One buffer parameter of a method. */
typedef struct nbpy_buffer_role {
  int argument;    /* index in the method's arguments */
  int writable;    /* role recv */
  int per_rank;    /* holds nranks * count elements */
  int root_only;   /* only the root reads or writes it (None elsewhere) */
  int in_place_of; /* index of the buffer (in buffers[]) it may be, or -1 */
} nbpy_buffer_role;

/* The C values of one call, in roles; a trampoline puts them in the function's order. */
typedef struct nbpy_call_values {
  unsigned long long buffer[NBPY_MAX_METHOD_BUFFERS];
  unsigned long long count;
  int datatype;
  long long op;
  int rank; /* root or peer */
  void *comm;
  void *stream;
  void *config; /* the config variant's record (its data), else NULL */
} nbpy_call_values;

typedef int (*nbpy_trampoline)(const nbpy_call_values *values); /* returns the ncclResult_t */

/* A method's resolver (generated per method in method_table.c over call_resolve.h): the C values
 * of a call from its bound arguments, with calls.py's checks. 1: *out and *call are filled; 0:
 * declined, nothing done (*out may hold a partial call); -1: an exception Python would raise too. */
typedef int (*nbpy_resolver)(PyObject *comm, PyObject *const *bound, nbpy_call_values *out, nbpy_trampoline *call);

typedef struct nbpy_method_spec {
  const char *name;     /* the method's name */
  const char *function; /* the NCCL function, for errors */
  nbpy_trampoline call;
  nbpy_resolver resolve;     /* this row's nbpy_resolve_call, specialized by the compiler */
  vectorcallfunc vectorcall; /* this row's nbpy_method_vectorcall: the method descriptor's call */
  int blocking; /* release the GIL around the call */
  int nargs;    /* arguments after self */
  int npositional;
  const char *arguments[NBPY_MAX_METHOD_ARGS];
  int defaults[NBPY_MAX_METHOD_ARGS]; /* enum nbpy_default */
  int nbuffers;
  nbpy_buffer_role buffers[NBPY_MAX_METHOD_BUFFERS];
  int count_of;     /* the buffer whose size gives the count */
  int op_arg;       /* argument index, or -1 */
  int rank_arg;     /* argument index of root or peer, or -1 */
  int rank_is_root; /* rank_arg is a root (root_only buffers refer to it) */
  int stream_arg;
  int config_arg; /* -1: no config variant */
  const char *config_function;     /* the config variant, for errors */
  nbpy_trampoline call_config;     /* the config variant, taken for a config of config_class */
  nbpy_record_class *config_class; /* the record the variant takes; any other config goes to Python */
} nbpy_method_spec;

extern const nbpy_method_spec *const nbpy_method_specs[];
extern const size_t nbpy_method_spec_count;

/* _install_method(cls, name, python_definition) -> a method descriptor for cls.name */
PyObject *nbpy_install_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
int nbpy_call_engine_ready(PyObject *module);

/* A stream argument's handle, as the fast path reads it (None: 0, an int, the last stream object
 * seen, else ncclbind.base.streams.stream_handle): 1 *out set; 0 declined (a value the
 * generated call would reject); -1 stream_handle raised. */
int nbpy_stream_value(PyObject *stream, void **out);

/* The stream arguments the engine has converted last (call_engine.c): a stream object and its
 * handle, an int and its value. */
typedef struct nbpy_stream_view {
  PyObject *object, *integer; /* strong references */
  void *handle, *value;
} nbpy_stream_view;
extern nbpy_stream_view nbpy_streams;

/* nbpy_stream_value, its common cases inline: None, and the last stream object or int. */
static inline NBPY_ALWAYS_INLINE int nbpy_stream_of(PyObject *stream, void **out) {
  if (stream == Py_None) *out = NULL;
  else if (stream == nbpy_streams.object) *out = nbpy_streams.handle;
  else if (stream == nbpy_streams.integer) *out = nbpy_streams.value;
  else return nbpy_stream_value(stream, out);
  return 1;
}

/* A method descriptor (ncclbind._nccl.FastMethod): the C fast path of a row, in front of the
 * method's Python definition. */
typedef struct nbpy_fast_method {
  PyObject_HEAD
  const nbpy_method_spec *spec;
  PyObject *python; /* the method's Python definition: the reference, and every declined call */
  vectorcallfunc vectorcall;
  PyObject *names[NBPY_MAX_METHOD_ARGS]; /* the argument names, interned */
} nbpy_fast_method;

/* How many communicators have a watchdog: while any do, every call goes to Python, where the
 * watchdog times it (ncclbind/base/watchdog.py). */
extern Py_ssize_t nbpy_watched_communicators;

/* NcclRedOp.SUM, the default op (set when the first method is installed). */
extern PyObject *nbpy_sum_op;


/* A call the fast path did not make (made: 0 declined, -1 an exception is set): the Python
 * definition's answer, or NULL. */
PyObject *nbpy_method_declined(nbpy_fast_method *self, int made, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames);

/* The communicator's fields the fast path reads (enum nbpy_comm_field, NBPY_COMM_FIELD_NAMES) and
 * the method it calls (NBPY_COMM_OP_METHOD): rendered from base/comm_interface.py, their one
 * declaration. */
#include "generated/comm_interface.h"

/* What the engine learned of the last communicator type and its int fields (call_engine.c
 * fills it): the offsets of the type's slots (-1 where it has none: the attribute is looked
 * up), and for each int field the int object it held last (kept: ints are immutable, so while
 * a field holds that object its value is known without converting it again) and its value. */
typedef struct nbpy_comm_view {
  PyTypeObject *type; /* a strong reference: its address stays its own */
  Py_ssize_t offsets[NBPY_COMM_FIELDS];
  PyObject *int_seen[NBPY_COMM_FIELDS];
  long long int_value[NBPY_COMM_FIELDS];
} nbpy_comm_view;
extern nbpy_comm_view nbpy_comm;

/* The readers' slow paths: an unknown type, a changed int, an attribute (call_engine.c). */
long long nbpy_comm_int_slow(PyObject *comm, int field);
PyObject *nbpy_comm_field_slow(PyObject *comm, int field);

/* The slot of a communicator of the known type, borrowed (NULL: unset or not a slot). */
static inline NBPY_ALWAYS_INLINE PyObject *nbpy_comm_slot(PyObject *comm, int field) {
  Py_ssize_t offset = nbpy_comm.offsets[field];
  return Py_TYPE(comm) == nbpy_comm.type && offset >= 0 ? *(PyObject **)((char *)comm + offset) : NULL;
}

/* An int field of the communicator, or -1 (no exception) when it is missing or not an int. */
static inline NBPY_ALWAYS_INLINE long long nbpy_comm_int(PyObject *comm, int field) {
  PyObject *value = nbpy_comm_slot(comm, field);
  if (value && value == nbpy_comm.int_seen[field]) return nbpy_comm.int_value[field];
  return nbpy_comm_int_slow(comm, field);
}

/* A field of the communicator (a new reference), or NULL (no exception) when it is missing. */
static inline NBPY_ALWAYS_INLINE PyObject *nbpy_comm_field(PyObject *comm, int field) {
  PyObject *value = nbpy_comm_slot(comm, field);
  return value ? Py_NewRef(value) : nbpy_comm_field_slow(comm, field);
}

/* _set_path_observer's callable, or NULL: told of each call, (method, made here), while set
 * (nbpy_observe_path, which keeps whatever error is set). */
extern PyObject *nbpy_path_observer;
void nbpy_observe_path(const nbpy_method_spec *spec, int made);

/* Make the call of resolved values: 1: made; 0: declined (the communicator's gate is gone or
 * closed: calls.py raises); -2: NCCL's error (raised). Inline: both of its callers (a method's
 * vectorcall, a prepared call) are on the fast path. */
static inline NBPY_ALWAYS_INLINE int nbpy_issue_call(const nbpy_method_spec *spec, PyObject *comm, const nbpy_call_values *v,
                                  nbpy_trampoline call) {
  PyObject *gate = nbpy_comm_field(comm, NBPY_COMM_GATE);
  if (!gate) return 0;
  if (!Py_IS_TYPE(gate, &nbpy_call_gate_type) || !nbpy_gate_enter(gate)) {
    Py_DECREF(gate);
    return 0; /* closed: calls.py raises */
  }
  int result;
  if (spec->blocking) {
    Py_BEGIN_ALLOW_THREADS
    result = call(v);
    Py_END_ALLOW_THREADS
  } else {
    result = call(v);
  }
  nbpy_gate_leave(gate);
  Py_DECREF(gate);
  if (nbpy_path_observer) nbpy_observe_path(spec, 1);
  if (result != nb_ncclSuccess && result != nb_ncclInProgress) {
    nbpy_raise_result(result, v->config ? spec->config_function : spec->function);
    return -2;
  }
  return 1;
}

/* The op argument's ncclRedOp_t value, as Communicator._op would answer it (dtype: the
 * buffers' NcclDataType): 1 and *out; 0 declined; -1 Communicator._op's own error. */
int nbpy_op_value(PyObject *comm, PyObject *op, PyObject *dtype, long long *out);

/* The last op given by its value (an exact int or an NcclRedOp member: the same for every
 * communicator) and that value, kept so a loop passing one op converts it once. */
typedef struct nbpy_op_view {
  PyObject *op; /* a strong reference */
  long long value;
} nbpy_op_view;
extern nbpy_op_view nbpy_op_seen;

/* nbpy_op_value, the last op given by its value inline. */
static inline NBPY_ALWAYS_INLINE int nbpy_op_of(PyObject *comm, PyObject *op, PyObject *dtype, long long *out) {
  if (op != nbpy_op_seen.op) return nbpy_op_value(comm, op, dtype, out);
  *out = nbpy_op_seen.value;
  return 1;
}

/* A C method descriptor's attributes: __doc__, __name__, __qualname__, __module__ and any the
 * descriptor lacks are those of `python`, its Python definition. */
PyObject *nbpy_definition_getattro(PyObject *self, PyObject *name, PyObject *python);

#endif /* NCCLBIND_CALL_ENGINE_H_ */
