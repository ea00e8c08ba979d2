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

/* What the loader knows of a library before it is loaded: its names, where to look, and
 * the header home its run-time kernel compiles read (kernel_headers.c). */
typedef struct library_descriptor {
  const char *display_name; /* "libnccl" */
  const char *product_name; /* "NCCL", used with version numbers */
  const char *sonames[3];   /* file names to look for, NULL-terminated */
  const char *path_env;     /* explicit-path environment variable */
  const char *version_symbol;
  int min_version, max_version; /* a version code outside them is no such library */
  /* The header home NCCL EP's run-time kernel compiler reads: it compiles with
   * -I$NCCL_EP_HOME/include/nccl_ep and -I$NCCL_HOME/include (names and subpaths read from
   * libnccl_ep.so 0.2.0), else with the folders of its own build machine. */
  const char *home_env;
  const char *home_marker;   /* under <home>: what a wheel-like layout has */
  const char *version_macro; /* the home_marker header's version code, or NULL */
} library_descriptor;


/* lib's descriptor, or NULL for an unknown lib. */
const library_descriptor *ncclbind_descriptor(ncclbind_lib lib);

/* The loaded library's real path and version code (0 if it has no version
 * function). Returns 0 without touching the outputs if the library is not loaded. */
int ncclbind_loaded_library(ncclbind_lib lib, const char **path, int *version_code);

/* sym's function if its library is already loaded and exports it; never loads
 * and never sets the last error. */
void *ncclbind_resolve_if_loaded(ncclbind_symbol *sym);

/* ---- kernel_headers.c ------------------------------------------------- */

/* The wheel-like home of a library file (<home>/lib[/<sub>]/<file> beside <home>/<marker>)
 * into home; 1 if there is one. */
int ncclbind_wheel_home(const library_descriptor *d, const char *library_path, char *home, size_t size);
/* Sets d->home_env to the wheel home of library_path unless the user set it. */
void ncclbind_default_home(const library_descriptor *d, const char *library_path);
/* For a library that compiles kernels at run time (libnccl_ep, loaded from path at
 * version_code): which NCCL headers its compiler will read (NCCL_HOME); sets NCCL_HOME when
 * the user has not and the loaded libnccl's home matches, and says what was found in *status
 * (NCCLBIND_KERNEL_HEADERS_*) and *message. Called by the loader before it publishes the handle. */
void ncclbind_settle_kernel_headers(ncclbind_lib lib, int version_code, const char *path, int *status,
                                    ncclbind_message *message);

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
