/* ncclbind runtime: lazy loading of libnccl and libnccl_ep, per-symbol
 * resolution, error reporting and version information.
 *
 * Hand-written. Every binding (the generated C calls, the CPython extension,
 * the Rust sys crate) sits on this one runtime; none of them dlopen on their own.
 */
#ifndef NCCLBIND_RUNTIME_H_
#define NCCLBIND_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <atomic>
#define NCCLBIND_ATOMIC_PTR std::atomic<void *>
extern "C" {
#else
#include <stdatomic.h>
#define NCCLBIND_ATOMIC_PTR void *_Atomic
#endif

/* The libraries the runtime knows. */
typedef enum ncclbind_lib {
  NCCLBIND_LIB_NCCL = 0,    /* libnccl.so.2 */
  NCCLBIND_LIB_NCCL_EP = 1, /* libnccl_ep.so */
  NCCLBIND_LIB_COUNT = 2
} ncclbind_lib;

/* Status codes of the runtime itself. They live far outside ncclResult_t's
 * range (0..~16) so a generated wrapper can return them in place of an
 * ncclResult_t and a caller can tell them apart. ncclbind_last_error() holds
 * the message. */
enum {
  NCCLBIND_OK = 0,
  NCCLBIND_ERROR_LIBRARY_NOT_FOUND = 0x4E420001, /* no candidate path loaded */
  NCCLBIND_ERROR_SYMBOL_NOT_FOUND = 0x4E420002,  /* loaded library lacks the function */
  NCCLBIND_ERROR_INVALID_ARGUMENT = 0x4E420003,  /* rejected before NCCL was called */
  NCCLBIND_ERROR_STATE = 0x4E420004,             /* e.g. set_library_path after load */
  NCCLBIND_ERROR_FOREIGN_EXCEPTION = 0x4E420005  /* the library threw a C++ exception (caught) */
};

/* One pointer slot per bound function. Generated code defines one static
 * slot per function; the fast path is a single acquire load. */
typedef struct ncclbind_symbol {
  NCCLBIND_ATOMIC_PTR fn;      /* NULL until resolved */
  const char *name;            /* exported symbol name, e.g. "ncclAllReduce" */
  ncclbind_lib lib;            /* which library exports it */
  int since_version;           /* first library version code that has it (0: unknown) */
  int until_version;           /* first version code that no longer has it (0: the newest has it) */
} ncclbind_symbol;

/* Slow path: load the library if needed and resolve sym. Returns the function
 * pointer, or NULL with the thread's last error set (names the function, the
 * releases that have it, and the loaded library's version and path); then
 * ncclbind_last_error_code() says why: NCCLBIND_ERROR_LIBRARY_NOT_FOUND or
 * NCCLBIND_ERROR_SYMBOL_NOT_FOUND (a wrapper returns that code). Safe to call
 * from many threads at once; a slot, once set, never changes. */
void *ncclbind_resolve(ncclbind_symbol *sym);

static inline void *ncclbind_symbol_get(ncclbind_symbol *sym) {
#ifdef __cplusplus
  void *p = sym->fn.load(std::memory_order_acquire);
#else
  void *p = atomic_load_explicit(&sym->fn, memory_order_acquire);
#endif
  return p ? p : ncclbind_resolve(sym);
}

/* ---- Loading ---------------------------------------------------------- */

/* File names: libnccl.so.2 for libnccl; libnccl_ep.so, then its SONAME
 * libnccl_ep.so.0, for libnccl_ep. Where to look, in order:
 *   1. a library already in the process (dlopen RTLD_NOLOAD of the soname);
 *   2. the explicit path: ncclbind_set_library_path(), else the environment
 *      variable NCCLBIND_NCCL_PATH / NCCLBIND_NCCL_EP_PATH. When one is set it
 *      is the only candidate after step 1: a wrong explicit path is an error,
 *      never a silent fall-back to another copy of the library;
 *   3. directories added by a binding (pip wheel locations), in call order;
 *   4. $CUDA_HOME/lib and $CUDA_HOME/lib64 (CUDA_HOME unset: /usr/local/cuda);
 *   5. the bare soname (the dynamic loader's own search).
 * Libraries are opened RTLD_NOW | RTLD_GLOBAL and never closed. Loading
 * libnccl_ep first loads libnccl (same rules, failure ignored) so that
 * libnccl_ep's own dependency on libnccl.so.2 binds to the copy chosen here.
 * set_library_path(lib, NULL or "") clears the explicit path. Each setter
 * fails with NCCLBIND_ERROR_STATE once the library is loaded. */
int ncclbind_set_library_path(ncclbind_lib lib, const char *path);
int ncclbind_add_search_dir(ncclbind_lib lib, const char *dir);

/* Load now (idempotent, thread-safe: one thread searches, the others wait).
 * On failure the last error lists every path tried with dlerror()'s reason
 * for each, and nothing is remembered: the next call (from any wrapper)
 * searches again, so a binding can fix the path and retry. */
int ncclbind_load(ncclbind_lib lib);

/* Resolve-everything-now mode: resolve every slot in the NULL-terminated
 * array now (loading the libraries the slots name). Missing symbols are not
 * an error here (they stay NULL and fail at call time); returns the number
 * of slots that hold a function afterwards. Sets the last error only if a
 * library cannot be loaded. */
int ncclbind_resolve_all(ncclbind_symbol *const *syms);

/* Generated code registers its NULL-terminated slot table for lib (the table
 * must stay valid for the life of the process; registering never loads).
 * When the environment variable NCCLBIND_RESOLVE_NOW is set and not "0", the
 * slots of every registered table that belong to lib are resolved right after
 * lib loads (or at once, for a table registered after the load). */
void ncclbind_register_table(ncclbind_lib lib, ncclbind_symbol *const *syms);

/* Generated code records that lib was generated against a header set that needs
 * dependency at version code needed_version or newer (libnccl_ep -> libnccl: the IR's
 * depends_on). Used only to explain a failed load: when lib cannot be loaded and the
 * dependency in use is older, the error names lib's version (read from its file), the
 * dependency's version and path, and the version needed. The last call wins. */
void ncclbind_register_dependency(ncclbind_lib lib, ncclbind_lib dependency, int needed_version);

/* ---- Kernel headers ---------------------------------------------------
 * NCCL EP compiles its kernels at run time with -I$NCCL_HOME/include (NCCL's device headers),
 * and its host code, compiled against one NCCL release's headers, hands them structs laid
 * out by that release's (ncclDevComm and what follows it). NCCL_HOME must hold exactly that
 * release's headers: another release's lay the structs out differently and the kernels read
 * their arguments at wrong offsets (an illegal address), even when the loaded libnccl is that
 * other release. Generated code registers the release per version of the library; when the
 * library loads, the runtime reads NCCL_VERSION_CODE from <home>/include/nccl.h of NCCL_HOME
 * when the user set it (and keeps it, matching or not), else of the loaded libnccl's wheel
 * home (<home>/lib/libnccl.so.2 beside <home>/include/nccl.h), and sets NCCL_HOME to that
 * home only when its version is the registered one. (With no registration for the loaded
 * version it sets NCCL_HOME to the wheel home unchecked, as before.) */
typedef enum ncclbind_kernel_headers_status {
  /* Nothing to check against: no registration for this version of lib (or lib compiles no
   * kernels, or it cannot be loaded: then the message is the load error). */
  NCCLBIND_KERNEL_HEADERS_UNKNOWN = 0,
  /* NCCL_HOME holds the registered release's headers (the user's, or set by the runtime). */
  NCCLBIND_KERNEL_HEADERS_MATCH = 1,
  /* The user's NCCL_HOME holds another release's headers, or its include/nccl.h cannot be
   * read: the kernels would be compiled against the wrong layouts. */
  NCCLBIND_KERNEL_HEADERS_MISMATCH = 2,
  /* NCCL_HOME is unset and the loaded libnccl's home does not hold the registered release's
   * headers (or there is none): NCCL EP's compiler falls back to its build machine's folders,
   * and its first kernel compile fails (ncclInternalError). */
  NCCLBIND_KERNEL_HEADERS_UNSET = 3
} ncclbind_kernel_headers_status;

/* Generated code records that version lib_version of lib compiles its kernels at run time
 * against the device headers of headers_lib at headers_version (the IR's kernel_headers).
 * Register before lib loads (generated code does, from a constructor); a later registration
 * for the same lib_version replaces the earlier one. */
void ncclbind_register_kernel_headers(ncclbind_lib lib, int lib_version, ncclbind_lib headers_lib,
                                      int headers_version);

/* The registered headers' version code for version lib_version of lib (0: none); the library
 * they belong to in *headers_lib (may be NULL). Never loads. */
int ncclbind_kernel_headers_required(ncclbind_lib lib, int lib_version, ncclbind_lib *headers_lib);

/* Loads lib if needed and returns its ncclbind_kernel_headers_status, decided when it loaded.
 * *message (may be NULL) receives one paragraph naming the library and its version, the NCCL
 * release whose headers its kernels need, what NCCL_HOME is (or would have been) and the
 * release there, and the fix. It stays valid for the life of the process, except when lib
 * cannot be loaded: then it is the thread's last error (ncclbind_last_error). Thread-safe. */
int ncclbind_kernel_headers(ncclbind_lib lib, const char **message);

/* ---- Errors ----------------------------------------------------------- */

/* Calls call(args) and returns what it returns. A C++ exception that leaves it is caught here
 * and never reaches the caller's frames (where it would end the process: Rust aborts on a foreign
 * exception, C and Python reach std::terminate): the result is then
 * NCCLBIND_ERROR_FOREIGN_EXCEPTION, and the thread's last error names `function`, the exception's
 * type and its what(). The generated wrappers of the functions conventions.toml marks as throwing
 * (NCCL EP's, whose library is C++) call through it; call is a C function of theirs that calls
 * the library with the arguments packed in args. Defined in runtime/src/foreign_exceptions.cc,
 * C++: a program that links those wrappers links it and the C++ runtime library (-lstdc++). */
int ncclbind_call_guarded(int (*call)(void *args), void *args, const char *function);

/* Thread-local message of the last runtime failure on this thread ("" if none).
 * Bounded (8 KiB); a message cut to fit ends in "...". Successful calls do not
 * clear it. */
const char *ncclbind_last_error(void);
/* The NCCLBIND_ERROR_* code that goes with ncclbind_last_error() (NCCLBIND_OK if none). */
int ncclbind_last_error_code(void);
void ncclbind_clear_error(void);
/* Set the thread's last error (printf-style); used by bindings for argument checks.
 * Returns NCCLBIND_ERROR_INVALID_ARGUMENT for convenience. */
int ncclbind_set_invalid_argument(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Name and description of a result code: ncclResult_t values (names as in
 * nccl.h up to NCCL 2.32: ncclSuccess .. ncclTimeout), the runtime's own codes
 * above, and any unknown value (reported as "unknown result code N", never a
 * crash). The description comes from the loaded libnccl's ncclGetErrorString
 * when libnccl is loaded and knows the code, else from a built-in text; these
 * never load anything. The pointers stay valid for the life of the process,
 * except the "unknown result code N" texts: thread-local, overwritten by the
 * next unknown code on the same thread. */
const char *ncclbind_result_name(int code);
const char *ncclbind_result_description(int code);

/* The loaded libnccl's ncclGetLastError(NULL): NCCL's own text about its last
 * failure; "" when libnccl is not loaded. Never loads. */
const char *ncclbind_nccl_last_error(void);

/* ---- Versions --------------------------------------------------------- */

typedef struct ncclbind_library_info {
  int loaded;          /* 1 if loaded; otherwise the fields below are empty */
  int version_code;    /* e.g. 22809 for NCCL 2.28.9 */
  int major, minor, patch;
  int cuda_major;      /* CUDA major version the library was built for, 0 if unknown */
  int cuda_minor;
  char cuda_variant[16]; /* e.g. "cu13", "" if unknown */
  char path[4096];     /* resolved file path of the loaded library */
} ncclbind_library_info;

/* Loads the library if needed. Returns NCCLBIND_OK or the load error (then
 * *out is zeroed). version_code comes from ncclGetVersion / ncclEpGetVersion;
 * the CUDA fields from the "version X.Y.Z+cudaA.B" banner in the file's
 * read-only data (left 0 / "" if there is none). */
int ncclbind_get_library_info(ncclbind_lib lib, ncclbind_library_info *out);

/* libnccl version code -> (major, minor, patch), for NCCL's two encodings
 * (X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after; codes below 10000 are the
 * old one). Any output may be NULL. ncclbind_get_library_info decodes libnccl_ep
 * codes itself: those are always MAJOR*10000+MINOR*100+PATCH. */
void ncclbind_decode_version(int code, int *major, int *minor, int *patch);

#ifdef __cplusplus
}
#endif
#endif /* NCCLBIND_RUNTIME_H_ */
