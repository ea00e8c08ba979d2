/* A stand-in libcuda.so.1 with just the driver calls the shim's GPU time uses: events stamped
 * with the host clock when recorded, a context that is one constant. Nothing here is CUDA. */
#include <stdlib.h>
#include <time.h>

#define API __attribute__((visibility("default")))
typedef struct event {
  double ms;
} event;
static int context_token;

API int cuCtxGetCurrent(void **context) {
  *context = &context_token;
  return 0;
}
API int cuCtxSetCurrent(void *context) {
  return context == &context_token ? 0 : 201; /* CUDA_ERROR_INVALID_CONTEXT */
}
API int cuEventCreate(void **e, unsigned flags) {
  (void)flags;
  *e = calloc(1, sizeof(event));
  return *e ? 0 : 2;
}
API int cuEventRecord(void *e, void *stream) {
  (void)stream;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ((event *)e)->ms = ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  return 0;
}
API int cuEventQuery(void *e) {
  return e ? 0 : 400;
}
API int cuEventSynchronize(void *e) {
  return e ? 0 : 400;
}
API int cuEventElapsedTime(float *ms, void *start, void *end) {
  *ms = (float)(((event *)end)->ms - ((event *)start)->ms);
  return 0;
}
API int cuEventDestroy_v2(void *e) {
  free(e);
  return 0;
}
