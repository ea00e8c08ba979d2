/* The fast path's resolution of a call (see call_engine.h), as one always-inlined function:
 * method_table.c (generated) instantiates it once per method with that method's constant row,
 * so the compiler folds the row (its buffers, defaults and argument positions) into straight
 * code. Before, one function read every row at run time: ~340 instructions a call of
 * all_reduce spent on the row itself (callgrind, over the stand-in). Only method_table.c
 * includes this file. */
#ifndef NCCLBIND_CALL_RESOLVE_H_
#define NCCLBIND_CALL_RESOLVE_H_

#include <stdint.h>

#include "buffer_cache.h"
#include "call_engine.h"

#if defined(__GNUC__)
/* loops over the row's buffers and arguments, unrolled: with the row constant, each copy folds
 * to its buffer or argument (-O2 does not unroll them by itself) */
#define NBPY_EACH_BUFFER _Pragma("GCC unroll 4")
#define NBPY_EACH_ARGUMENT _Pragma("GCC unroll 8")
#else
#define NBPY_EACH_BUFFER
#define NBPY_EACH_ARGUMENT
#endif

/* The C values of a call from the method's bound arguments, with calls.py's checks: 1: *out
 * and *call_out are filled; 0: declined, nothing done; -1: an exception Python would raise too.
 * *out is written as the values are found (a copy of a local struct at the end cost ~10 ns per
 * call: a `rep movs` of 72 bytes), so on 0 or -1 it holds a partial call the caller drops. */
static inline NBPY_ALWAYS_INLINE int nbpy_resolve_call(const nbpy_method_spec *spec, PyObject *comm,
                                                       PyObject *const *bound, nbpy_call_values *out,
                                                       nbpy_trampoline *call_out) {
  nbpy_trampoline call = spec->call;
  void *config = NULL;
  if (spec->config_arg >= 0 && bound[spec->config_arg] != Py_None) {
    PyObject *given = bound[spec->config_arg];
    if (!spec->config_class || Py_TYPE(given) != &spec->config_class->type) return 0; /* a dict: calls.py */
    config = ((nbpy_record *)given)->data;
    call = spec->call_config;
  }
  long long handle = nbpy_comm_int(comm, NBPY_COMM_HANDLE);
  if (handle <= 0) return 0; /* destroyed: calls.py raises */
  long long device = nbpy_comm_int(comm, NBPY_COMM_DEVICE);
  long long nranks = 1, rank = 0, rank_arg = -1;
  int need_ranks = spec->rank_arg >= 0;
  for (int b = 0; b < spec->nbuffers; ++b) need_ranks |= spec->buffers[b].per_rank;
  if (need_ranks) {
    nranks = nbpy_comm_int(comm, NBPY_COMM_NRANKS);
    rank = nbpy_comm_int(comm, NBPY_COMM_RANK);
    if (nranks < 1 || rank < 0) return 0;
  }
  if (spec->rank_arg >= 0) {
    PyObject *r = bound[spec->rank_arg];
    if (!PyLong_CheckExact(r)) return 0;
    rank_arg = PyLong_AsLongLong(r);
    if (rank_arg == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    if (rank_arg < 0 || rank_arg >= nranks) return 0;
  }
  int on_root = spec->rank_is_root && rank_arg == rank;

  nbpy_call_values *v = out;
  for (int b = 0; b < NBPY_MAX_METHOD_BUFFERS; ++b) v->buffer[b] = 0;
  v->count = 0;
  v->datatype = 0;
  v->op = 0;
  v->rank = (int)rank_arg;
  v->comm = (void *)(uintptr_t)handle;
  v->stream = NULL;
  v->config = config;
  nbpy_known_buffer known[NBPY_MAX_METHOD_BUFFERS];
  /* at[b]: the entry of known[] that holds buffer b's reading, its own or that of the buffer it is
   * (in place, or the same object given twice): shared, not copied (a copy cost ~18 instructions) */
  int at[NBPY_MAX_METHOD_BUFFERS];
  int present[NBPY_MAX_METHOD_BUFFERS] = {0};
  /* The buffer that gives the count first, then the others (calls.py's order). */
  NBPY_EACH_BUFFER
  for (int i = 0; i < spec->nbuffers; ++i) {
    int b = i == 0 ? spec->count_of : (i <= spec->count_of ? i - 1 : i);
    const nbpy_buffer_role *role = &spec->buffers[b];
    PyObject *obj = bound[role->argument];
    int other = role->in_place_of;
    if (other >= 0 && (obj == bound[spec->buffers[other].argument] || (obj == Py_None && !role->root_only)))
      continue; /* in place: it is the other buffer, resolved below or above */
    if (obj == Py_None) {
      if (!role->root_only || on_root) return 0;
      continue; /* not the root: NULL */
    }
    int same = -1; /* the same object given for another buffer (reduce(x, x)): its resolution */
    NBPY_EACH_BUFFER
    for (int j = 0; j < spec->nbuffers; ++j)
      if (same < 0 && present[j] && bound[spec->buffers[j].argument] == obj) same = j;
    if (same >= 0) {
      at[b] = at[same];
      present[b] = 1;
      continue;
    }
    int got = nbpy_known_buffer_of(obj, &known[b]);
    if (got <= 0) return got;
    if (known[b].has_device && known[b].device != device) return 0;
    at[b] = b;
    present[b] = 1;
  }
  NBPY_EACH_BUFFER
  for (int b = 0; b < spec->nbuffers; ++b) { /* in-place buffers share their partner's resolution */
    const nbpy_buffer_role *role = &spec->buffers[b];
    int other = role->in_place_of;
    PyObject *obj = bound[role->argument];
    if (present[b] || other < 0 || !(obj == bound[spec->buffers[other].argument] || obj == Py_None)) continue;
    if (obj == Py_None && role->root_only) continue;
    if (!present[other]) return 0;
    at[b] = at[other];
    present[b] = 1;
  }
  if (!present[spec->count_of]) return 0;
  const nbpy_known_buffer *first = &known[at[spec->count_of]];
  unsigned long long count = first->count;
  if (spec->buffers[spec->count_of].per_rank) {
    if (count % (unsigned long long)nranks) return 0;
    count /= (unsigned long long)nranks;
  }
  NBPY_EACH_BUFFER
  for (int b = 0; b < spec->nbuffers; ++b) {
    if (!present[b]) continue;
    const nbpy_known_buffer *k = &known[at[b]];
    if (spec->buffers[b].writable && k->readonly) return 0;
    if (k->datatype != first->datatype) return 0;
    unsigned long long expected = spec->buffers[b].per_rank ? count * (unsigned long long)nranks : count;
    if (k->count != expected) return 0;
    v->buffer[b] = k->ptr;
  }
  v->count = count;
  v->datatype = first->datatype;

  if (spec->op_arg >= 0) {
    int op_ok = nbpy_op_of(comm, bound[spec->op_arg], first->dtype, &v->op);
    if (op_ok <= 0) return op_ok;
  }
  int stream_ok = nbpy_stream_of(bound[spec->stream_arg], &v->stream);
  if (stream_ok <= 0) return stream_ok;
  *call_out = call;
  return 1;
}

/* A method descriptor's call (its vectorcall), for the method of `spec`: binds the call's
 * arguments as the method's Python definition does (args[0] is the communicator, called as a
 * method), resolves and makes the call; whatever it does not take goes, as it came, to the Python
 * definition. */
static inline NBPY_ALWAYS_INLINE PyObject *nbpy_method_vectorcall(const nbpy_method_spec *spec, PyObject *callable,
                                                                  PyObject *const *args, size_t nargsf,
                                                                  PyObject *kwnames) {
  nbpy_fast_method *self = (nbpy_fast_method *)callable;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject *bound[NBPY_MAX_METHOD_ARGS];
  int parsed = nargs >= 1 && nargs - 1 <= spec->npositional;
  if (!parsed) return nbpy_method_declined(self, 0, args, nargsf, kwnames);
  /* (each loop's trip count is the row's constant, so the compiler unrolls it and folds each
   * copy to its argument: a data-dependent exit in the loop's condition would prevent that) */
  NBPY_EACH_ARGUMENT
  for (int i = 0; i < spec->nargs; ++i) {
    bound[i] = i < nargs - 1                            ? args[i + 1]
               : spec->defaults[i] == NBPY_DEFAULT_NONE ? Py_None
               : spec->defaults[i] == NBPY_DEFAULT_SUM  ? nbpy_sum_op
                                                        : NULL;
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; parsed && k < nkw; ++k) {
    /* A call site's keywords are interned, so identity finds them; the text compare is for
     * a keyword built at run time. */
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    int slot = -1;
    NBPY_EACH_ARGUMENT
    for (int i = 0; i < spec->nargs; ++i)
      if (slot < 0 && name == self->names[i]) slot = i;
    for (int i = 0; i < spec->nargs && slot < 0; ++i)
      if (PyUnicode_CompareWithASCIIString(name, spec->arguments[i]) == 0) slot = i;
    parsed = slot >= nargs - 1; /* known, and not also given positionally */
    if (parsed) bound[slot] = args[nargs + k];
  }
  NBPY_EACH_ARGUMENT /* only a required argument can be missing: a keyword's value is never NULL */
  for (int i = 0; i < spec->nargs; ++i)
    if (spec->defaults[i] == NBPY_REQUIRED) parsed &= bound[i] != NULL;
  int made = 0;
  if (parsed && !nbpy_watched_communicators) {
    nbpy_call_values v;
    nbpy_trampoline call;
    made = nbpy_resolve_call(spec, args[0], bound, &v, &call);
    if (made > 0) made = nbpy_issue_call(spec, args[0], &v, call);
  }
  if (made > 0) Py_RETURN_NONE;
  if (made == -2) return NULL;
  return nbpy_method_declined(self, made, args, nargsf, kwnames);
}

#endif /* NCCLBIND_CALL_RESOLVE_H_ */
