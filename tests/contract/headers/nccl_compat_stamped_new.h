/* check-compat's versioned-growth pair, new side (3.2.0): compatCommConfig_t gains two
 * fields, the first in its old tail padding (24 -> 32 bytes); compatTuning_t gains one,
 * only in its tail padding (still 24 bytes); neither is a break. The unversioned
 * compatPlace_t grows at the end: a break. */
#ifndef NCCL_COMPAT_STAMPED_H_
#define NCCL_COMPAT_STAMPED_H_

#include <stddef.h>

#define COMPAT_VERSION_CODE 30200
#define COMPAT_MAGIC 0xcafebeefu

typedef enum { compatSuccess = 0, compatError = 1 } compatResult_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int priority;
  int flags;
} compatCommConfig_t;
#define COMPAT_COMM_CONFIG_INITIALIZER { sizeof(compatCommConfig_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 1, 0, 0 }

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int maxCtas;
  int minCtas;
} compatTuning_t;
#define COMPAT_TUNING_INITIALIZER { sizeof(compatTuning_t), COMPAT_MAGIC, COMPAT_VERSION_CODE, 0, 0 }

typedef struct {
  int rank;
  int nRanks;
  int stride;
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
