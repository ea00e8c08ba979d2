/* check-compat's synthetic base version (3.1.0): a small NCCL-like API. Not NCCL.
 * nccl_compat_additions.h changes it only in ways that keep code built against it
 * working; nccl_compat_breaks.h breaks it in every way check-compat knows. */
#ifndef NCCL_COMPAT_H_
#define NCCL_COMPAT_H_

#include <stddef.h>

#define COMPAT_VERSION_CODE 30100
#define COMPAT_MAGIC 0xcafebeefu
#define COMPAT_LIMIT 10

/* compatNumResults is a sentinel (the test's conventions say so). */
typedef enum { compatSuccess = 0, compatError = 1, compatNumResults = 2 } compatResult_t;
typedef enum { compatSum = 0, compatMax = 1, compatProd = 3 } compatOp_t;
typedef enum { compatNarrow = 1 } compatWidth_t;
typedef enum { compatModeA = 0, compatModeB = 1 } compatMode_t;

typedef struct compatComm* compatComm_t;
typedef int compatRank_t;
typedef void* compatHandle_t;
typedef int (*compatAllocFn_t)(void** ptr, size_t size);

/* Versioned: size, magic, version first. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  const char* name;
} compatConfig_t;
#define COMPAT_CONFIG_INITIALIZER { sizeof(compatConfig_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 1, NULL }

/* Not versioned. */
typedef struct {
  int rank;
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

#ifdef __cplusplus
extern "C" {
#endif

compatResult_t compatInit(compatComm_t* comm, int nranks, compatConfig_t* config);
compatResult_t compatSend(const void* buf, int count, int peer, compatComm_t comm);
compatResult_t compatReduce(const void* sendbuf, void* recvbuf, size_t count, compatOp_t op, compatComm_t comm);
compatResult_t compatGone(compatComm_t comm);
int compatTeamSize(compatTeam_t team);
compatResult_t compatSetAllocator(compatAllocFn_t alloc);

#ifdef __cplusplus
}
#endif

#endif
