/* nccl_compat_base.h, version 3.2.0, grown without breaking code built against 3.1.0:
 * a new function, enum, struct, typedef and constant; a new enumerator; the sentinel
 * counts it; the versioned config grows at the end; a parameter renamed; a field spelled
 * through a typedef of its type; constants and initializer values changed. */
#ifndef NCCL_COMPAT_H_
#define NCCL_COMPAT_H_

#include <stddef.h>

#define COMPAT_VERSION_CODE 30200
#define COMPAT_MAGIC 0xcafebeefu
#define COMPAT_LIMIT 16
#define COMPAT_TIMEOUT_MS 5000

typedef enum { compatSuccess = 0, compatError = 1, compatTimeout = 2, compatNumResults = 3 } compatResult_t;
typedef enum { compatSum = 0, compatMax = 1, compatProd = 3, compatMin = 4 } compatOp_t;
typedef enum { compatNarrow = 1 } compatWidth_t;
typedef enum { compatModeA = 0, compatModeB = 1 } compatMode_t;
typedef enum { compatLow = 0, compatHigh = 1 } compatPriority_t;

typedef struct compatComm* compatComm_t;
typedef int compatRank_t;
typedef void* compatHandle_t;
typedef int (*compatAllocFn_t)(void** ptr, size_t size);
typedef unsigned long compatTicket_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  const char* name;
  int priority;
  int flags;
} compatConfig_t;
#define COMPAT_CONFIG_INITIALIZER { sizeof(compatConfig_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 1, NULL, 0, 0 }

typedef struct {
  compatRank_t rank;
  int nRanks;
} compatTeam_t;

typedef struct {
  unsigned int ready : 1;
  unsigned int mode : 3;
} compatFlags_t;

typedef union {
  int i;
  float f;
} compatValue_t;

typedef struct {
  int a;
  int b;
} compatPair_t;

typedef struct {
  int unused;
} compatLegacy_t;

typedef struct {
  double seconds;
  int calls;
} compatStats_t;

#ifdef __cplusplus
extern "C" {
#endif

compatResult_t compatInit(compatComm_t* comm, int nranks, compatConfig_t* config);
compatResult_t compatSend(const void* buffer, int count, int peer, compatComm_t comm);
compatResult_t compatReduce(const void* sendbuf, void* recvbuf, size_t count, compatOp_t op, compatComm_t comm);
compatResult_t compatGone(compatComm_t comm);
int compatTeamSize(compatTeam_t team);
compatResult_t compatSetAllocator(compatAllocFn_t alloc);
compatResult_t compatGetStats(compatComm_t comm, compatStats_t* stats);

#ifdef __cplusplus
}
#endif

#endif
