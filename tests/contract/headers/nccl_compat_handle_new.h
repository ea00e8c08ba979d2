/* check-compat's handle pair, new side (3.2.0): the opaque handle points to a struct of
 * another name (not a break: old code only ever held the pointer); the handle whose struct
 * old code could read now points to another struct (a break); struct compatSegment is now
 * named compatSegment_v_t through a typedef (not a break) and grew (a break). */
#ifndef NCCL_COMPAT_HANDLE_H_
#define NCCL_COMPAT_HANDLE_H_

#include <stddef.h>

typedef enum { compatSuccess = 0, compatError = 1 } compatResult_t;

typedef struct compatWindow* compatWindow_t;

struct compatQueueImpl {
  int depth;
  int head;
};
typedef struct compatQueueImpl* compatQueue_t;

typedef struct compatSegment {
  void* base;
  size_t bytes;
} compatSegment_v_t;
typedef compatSegment_v_t* compatSegment_t;

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
