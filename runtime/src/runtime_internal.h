/* Interfaces shared between the runtime's source files; not installed. */
#ifndef NCCLBIND_RUNTIME_INTERNAL_H_
#define NCCLBIND_RUNTIME_INTERNAL_H_

#include <stddef.h>

#include "ncclbind/runtime.h"

#ifdef __cplusplus
extern "C" { /* foreign_exceptions.cc */
#endif

/* ---- errors.c --------------------------------------------------------- */

/* Capacity of the thread's last-error text, terminating NUL included. */
#define NCCLBIND_ERROR_CAPACITY 8192

/* A message assembled in pieces before it becomes the thread's last error.
 * Text that does not fit is cut and ends in "...". */
typedef struct ncclbind_message {
  char text[NCCLBIND_ERROR_CAPACITY];
  size_t length;
  int truncated;
} ncclbind_message;

void ncclbind_message_init(ncclbind_message *message);
void ncclbind_message_append(ncclbind_message *message, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Make the message (or the formatted text) the thread's last error; returns code. */
int ncclbind_error_set_message(int code, const ncclbind_message *message);
int ncclbind_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- loader.c --------------------------------------------------------- */

/* The loaded library's real path and version code (0 if it has no version
 * function). Returns 0 without touching the outputs if the library is not loaded. */
int ncclbind_loaded_library(ncclbind_lib lib, const char **path, int *version_code);

/* sym's function if its library is already loaded and exports it; never loads
 * and never sets the last error. */
void *ncclbind_resolve_if_loaded(ncclbind_symbol *sym);

/* ---- version.c -------------------------------------------------------- */

/* Version code -> numbers, with the encoding of lib (libnccl_ep always uses
 * MAJOR*10000+MINOR*100+PATCH, libnccl switched encodings after 2.8). */
void ncclbind_decode_library_version(ncclbind_lib lib, int code, int *major, int *minor,
                                     int *patch);
/* "2.28.9", or "of unknown version" when code <= 0. */
void ncclbind_format_version(ncclbind_lib lib, int code, char *out, size_t size);
/* The "x.y.z" of the "version x.y.z+cudaA.B" banner in the library file at path, without
 * loading it (a library that fails to load cannot be asked). 1 if found, else 0. */
int ncclbind_read_file_version(const char *path, char *out, size_t size);
/* The CUDA major version lib (loaded from path) was built for, from its banner; 0 if unknown.
 * Scanned once per library, as for ncclbind_get_library_info; never loads. */
int ncclbind_library_cuda_major(ncclbind_lib lib, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* NCCLBIND_RUNTIME_INTERNAL_H_ */
