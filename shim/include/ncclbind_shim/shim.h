/* The control API of ncclbind's interposition library (libncclbind_shim-nccl-<version>.so).
 *
 * A program (or ncclbind.shim from Python, through ctypes) finds these in its own process
 * with dlsym(RTLD_DEFAULT, ...) when the shim is preloaded. Every call returns 0 on success;
 * a positive value is an ncclResult_t NCCL returned, a negative one the shim's own failure
 * (NCCLBIND_SHIM_E*); ncclbind_shim_last_error() says what went wrong, naming the
 * communicator concerned. */
#ifndef NCCLBIND_SHIM_H_
#define NCCLBIND_SHIM_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCLBIND_SHIM_API_VERSION 1

enum { NCCLBIND_SHIM_OFF = 0, NCCLBIND_SHIM_COUNTS = 1, NCCLBIND_SHIM_FULL = 2 };
enum {
  NCCLBIND_SHIM_EINVAL = -1, /* a bad argument */
  NCCLBIND_SHIM_EIO = -2,    /* the trace or the store could not be written or read */
  NCCLBIND_SHIM_ESTATE = -3, /* not now: checkpoint mode off, nothing prepared, a live registration */
};

int ncclbind_shim_version(void);         /* NCCLBIND_SHIM_API_VERSION */
const char *ncclbind_shim_release(void); /* the NCCL release the wrappers are for, "2.28.9" */
int ncclbind_shim_set_mode(int mode);    /* NCCLBIND_SHIM_OFF / _COUNTS / _FULL */
int ncclbind_shim_get_mode(void);
int ncclbind_shim_set_gpu_timing(int on);   /* CUDA events around every collective (full mode) */
int ncclbind_shim_flush(void);              /* every thread's records to the JSONL file */
const char *ncclbind_shim_trace_path(void); /* the JSONL file ("" before the first record) */
int ncclbind_shim_function_count(void);
/* The counters of function i (0..count-1): its name, calls, failed calls, bytes. */
int ncclbind_shim_counters(int i, const char **name, uint64_t *calls, uint64_t *errors, uint64_t *bytes);
int ncclbind_shim_reset_counters(void);
int ncclbind_shim_checkpoint_enabled(void); /* 1 when the process started with NCCLBIND_SHIM_CHECKPOINT=1 */
int ncclbind_shim_checkpoint_prepare(void); /* drain and destroy every communicator, keeping how it was made */
int ncclbind_shim_checkpoint_restore(void); /* make them again behind the same handles */
int ncclbind_shim_live_comms(void);         /* communicators with a real NCCL handle now */
const char *ncclbind_shim_last_error(void); /* this thread's last failure */

#ifdef __cplusplus
}
#endif
#endif
