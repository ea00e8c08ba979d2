/* check-compat's versioned-growth pair, old side (3.1.0): two versioned config structs
 * (size, magic, version first, stamped by their initializers), each ending in 4 bytes of
 * tail padding, and an unversioned struct passed by value. */
#ifndef NCCL_COMPAT_STAMPED_H_
#define NCCL_COMPAT_STAMPED_H_

#include <stddef.h>

#define COMPAT_VERSION_CODE 30100
#define COMPAT_MAGIC 0xcafebeefu

typedef enum { compatSuccess = 0, compatError = 1 } compatResult_t;

/* 24 bytes: blocking at 16, then tail padding. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} compatCommConfig_t;
#define COMPAT_COMM_CONFIG_INITIALIZER { sizeof(compatCommConfig_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 1 }

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int maxCtas;
} compatTuning_t;
#define COMPAT_TUNING_INITIALIZER { sizeof(compatTuning_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 0 }

typedef struct {
  int rank;
  int nRanks;
} compatPlace_t;

#ifdef __cplusplus
extern "C" {
#endif

compatResult_t compatCommInit(int nranks, compatCommConfig_t* config);
compatResult_t compatTune(compatTuning_t* tuning);
int compatPlaceRank(compatPlace_t place);

#ifdef __cplusplus
}
#endif

#endif
