/* check-compat's handle pair, old side (3.1.0): an opaque handle whose struct is never
 * defined, a handle whose struct is defined (code may read it), and a struct named by its
 * tag that nccl_compat_handle_new.h names through a typedef (as NCCL 2.30 did with
 * struct ncclWindow_vidmem). */
#ifndef NCCL_COMPAT_HANDLE_H_
#define NCCL_COMPAT_HANDLE_H_

#include <stddef.h>

typedef enum { compatSuccess = 0, compatError = 1 } compatResult_t;

typedef struct compatWindow_vidmem* compatWindow_t;

struct compatQueue {
  int depth;
};
typedef struct compatQueue* compatQueue_t;

struct compatSegment {
  void* base;
};
typedef struct compatSegment* compatSegment_t;

#ifdef __cplusplus
extern "C" {
#endif

compatResult_t compatWindowRegister(void* buff, size_t size, compatWindow_t* win);
compatResult_t compatQueueCreate(compatQueue_t* queue);
compatResult_t compatSegmentGet(compatWindow_t win, compatSegment_t* segment);

#ifdef __cplusplus
}
#endif

#endif
