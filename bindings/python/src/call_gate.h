/* A communicator's call gate (ncclbind._nccl._CallGate, one per Communicator, its `_gate`
 * slot): every call that hands the communicator's handle to NCCL enters it first and leaves
 * it after NCCL returns; destroy() closes it, so that no new call starts, and waits until
 * the calls already inside have left before it frees the handle. abort() closes it and does
 * not wait: NCCL documents ncclCommAbort from another thread as the way to make a call that
 * is blocked inside NCCL return. A call's cost: a load and a store as it enters, and as it
 * leaves. */
#ifndef NCCLBIND_CALL_GATE_H_
#define NCCLBIND_CALL_GATE_H_

#include "ncclbind_python.h"

#include <pthread.h>
#include <stdatomic.h>

extern PyTypeObject nbpy_call_gate_type;

/* Callers enter and leave, and closers close, holding the GIL, which orders them: a call
 * that entered before the close is counted in `inside`, and one after it sees `closed`. So
 * `inside` needs no atomic read-modify-write (a lock prefix on every call), only atomic
 * loads and stores, for the one reader without the GIL: a closer waiting in wait(), under
 * the mutex, which the last call to leave a closed gate takes to wake it. */
typedef struct nbpy_call_gate {
  PyObject_HEAD
  atomic_long inside; /* calls between enter and leave */
  atomic_int closed;  /* no call enters any more */
  atomic_int taken;   /* destroy or abort has claimed the handle */
  pthread_mutex_t lock;
  pthread_cond_t left; /* the last call left a closed gate */
} nbpy_call_gate;

void nbpy_gate_wake(nbpy_call_gate *gate);

/* 1: entered (the communicator was open; leave with nbpy_gate_leave); 0: closed, not entered.
 * Both with the GIL held. */
static inline NBPY_ALWAYS_INLINE int nbpy_gate_enter(PyObject *self) {
  nbpy_call_gate *gate = (nbpy_call_gate *)self;
  if (atomic_load_explicit(&gate->closed, memory_order_relaxed)) return 0;
  atomic_store_explicit(&gate->inside, atomic_load_explicit(&gate->inside, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  return 1;
}

static inline NBPY_ALWAYS_INLINE void nbpy_gate_leave(PyObject *self) {
  nbpy_call_gate *gate = (nbpy_call_gate *)self;
  long inside = atomic_load_explicit(&gate->inside, memory_order_relaxed) - 1;
  atomic_store_explicit(&gate->inside, inside, memory_order_release);
  if (inside == 0 && atomic_load_explicit(&gate->closed, memory_order_relaxed)) nbpy_gate_wake(gate);
}

int nbpy_call_gate_ready(PyObject *module);

#endif /* NCCLBIND_CALL_GATE_H_ */
