/* nccl_compat_base.h, version 3.2.0, broken for code built against 3.1.0 in every way
 * check-compat knows: a function removed, a result type and parameter types changed, a
 * parameter added, a plain struct grown, a field inserted in the middle of the versioned
 * config, a bitfield moved, a union turned struct, an alignment raised, a struct, an enum
 * and a typedef removed, enumerators changed and removed, an enum widened, a typedef
 * changed. */
#ifndef NCCL_COMPAT_H_
#define NCCL_COMPAT_H_

#include <stddef.h>

#define COMPAT_VERSION_CODE 30200
#define COMPAT_MAGIC 0xcafebeefu
#define COMPAT_LIMIT 10u

typedef enum { compatSuccess = 0, compatError = 1, compatNumResults = 2 } compatResult_t;
typedef enum { compatSum = 0, compatMax = 2 } compatOp_t;
typedef enum { compatNarrow = 1, compatWide = 0x100000000 } compatWidth_t;

typedef struct compatComm* compatComm_t;
typedef int compatRank_t;
typedef int (*compatAllocFn_t)(void** ptr, size_t size, void* context);

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  const char* label;
  const char* name;
} compatConfig_t;
#define COMPAT_CONFIG_INITIALIZER { sizeof(compatConfig_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 1, NULL, NULL }

typedef struct {
  int rank;
  int nRanks;
  int stride;
} compatTeam_t;

typedef struct {
  unsigned int ready : 1;
  unsigned int spare : 2;
  unsigned int mode : 3;
} compatFlags_t;

typedef struct {
  int i;
  float f;
} compatValue_t;

typedef struct {
  alignas(8) int a;
  int b;
} compatPair_t;

#ifdef __cplusplus
extern "C" {
#endif

compatResult_t compatInit(compatComm_t* comm, int nranks, compatConfig_t* config, int flags);
compatResult_t compatSend(const void* buf, size_t count, int peer, compatComm_t comm);
compatResult_t compatReduce(const void* sendbuf, void* recvbuf, size_t count, compatComm_t comm);
size_t compatTeamSize(compatTeam_t team);
compatResult_t compatSetAllocator(compatAllocFn_t alloc);

#ifdef __cplusplus
}
#endif

#endif
