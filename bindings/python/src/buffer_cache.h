/* The per-object buffer cache of ncclbind/base/buffer.py, kept in C so that a
 * collective's fast path (collective_fast_path.c) reads it without running
 * Python. buffer.py stays the one resolver: it decides what is cached and
 * which types are read as CuPy arrays; this only answers with what it decided. */
#ifndef NCCLBIND_BUFFER_CACHE_H_
#define NCCLBIND_BUFFER_CACHE_H_

#include "ncclbind_python.h"

/* An NcclBuffer's fields as C values. */
typedef struct nbpy_known_buffer {
  unsigned long long ptr;
  unsigned long long count;
  int datatype;    /* the ncclDataType_t value */
  PyObject *dtype; /* the NcclDataType (borrowed: the cache or buffer.py's dtype map holds it) */
  int has_device;  /* NcclBuffer.device is not None */
  long device;
  int readonly;
} nbpy_known_buffer;

/* Whether buffer.py has already resolved obj: an NcclBuffer, a live cache entry
 * (a probed one, torch's, only while data_ptr() and numel() are unchanged), or
 * an object of a type buffer.py reads as a CuPy array, read here as _from_cupy
 * reads it and accepted only where _from_cupy would accept it. 1: *out is filled; 0: not
 * known, buffer.py must resolve it (nothing was changed); -1: an exception
 * (one buffer.py's own reading would raise at the same point). */
int nbpy_known_buffer_of(PyObject *obj, nbpy_known_buffer *out);

#endif /* NCCLBIND_BUFFER_CACHE_H_ */
