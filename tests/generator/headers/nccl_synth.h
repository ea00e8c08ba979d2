/* A synthetic header for the generator's golden tests: one of each construct
 * the real NCCL headers use, and a few they may use tomorrow. Not NCCL. */
#ifndef NCCL_SYNTH_H_
#define NCCL_SYNTH_H_

#include <stddef.h>
#include <stdint.h>

#define SYNTH_VERSION_CODE 10203
#define SYNTH_ID_BYTES 16
#define SYNTH_MAGIC 0xcafebeefu
#define SYNTH_BIG 0x123456789ULL
#define SYNTH_NEG (-7)
#define SYNTH_UNDEF_FLOAT -1.5f
#define SYNTH_NAME "synth"
#define SYNTH_NULL NULL
#define SYNTH_SHIFTED (1 << 4)
#define SYNTH_SQUARE(x) ((x) * (x))
#define SYNTH_FLAG

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handle. */
typedef struct synthComm* synthComm_t;

typedef struct { char internal[SYNTH_ID_BYTES]; } synthId;

/* Result codes. */
typedef enum { synthSuccess = 0, synthFailure = 1, synthNumResults = 2 } synthResult_t;

typedef enum { synthInt8 = 0, synthChar = synthInt8, synthFloat = 7, synthMax = 0x7fffffff } synthType_t;

typedef enum { synthDummy_a } synthOp_dummy_t;

/* Packed flags in bitfields. */
typedef struct synthFlags {
  unsigned int ready : 1;
  unsigned int mode : 3;
  unsigned int : 0;
  unsigned short count : 12;
  uint64_t tail;
} synthFlags_t;

/* An anonymous union member and a named member of unnamed struct type. */
typedef struct synthValue {
  int kind;
  union {
    int i;
    double d;
    const char* s;
  };
  struct {
    int x;
    int y;
  } point;
  char tag[3];
} synthValue_t;

/* A versioned configuration, filled by SYNTH_CONFIG_INITIALIZER. */
typedef struct synthConfig_v10203 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  const char* name;
  float ratio;
  synthType_t type;
} synthConfig_t;

#define SYNTH_CONFIG_INITIALIZER { sizeof(synthConfig_t), SYNTH_MAGIC, SYNTH_VERSION_CODE, -1, NULL, 0.5f, synthFloat }

/* A struct filled by a compound-literal macro with designated initializers. */
typedef struct synthTensor {
  unsigned int size;
  unsigned int magic;
  void* data;
  int64_t count;
} synthTensor_t;
#define SYNTH_TENSOR_INIT ((synthTensor_t){ .size = (unsigned int)sizeof(synthTensor_t), .magic = 42 })

/* The initializer's name does not mark the word break (COLLCONFIG vs CollConfig). */
typedef struct synthCollConfig_v1 {
  size_t size;
  int minCTAs;
} synthCollConfig_t;
#define SYNTH_COLLCONFIG_INITIALIZER { sizeof(synthCollConfig_t), -3 }

/* Allocation hooks. */
typedef int (*synthAllocFn_t)(void** ptr, size_t size, void* context);

struct synthAligned {
  alignas(16) char space[8];
  int after;
};

/* Get the version. */
synthResult_t synthGetVersion(int* version);
synthResult_t psynthGetVersion(int* version);

/* Unnamed parameters and an out-array sized by another parameter. */
synthResult_t synthInitAll(synthComm_t* comms, int ndev, const int* devlist);
synthResult_t synthSend(const void*, size_t count, synthType_t, int peer, synthComm_t comm);
synthResult_t synthConfigure(synthComm_t comm, synthConfig_t* config, synthAllocFn_t alloc);
const char* synthErrorString(synthResult_t result);
synthFlags_t synthDefaultFlags(void);

#ifdef __cplusplus
}

/* C++ only: a type nested in a record, mirrored as synthOuter__Inner. */
struct synthOuter {
  struct Inner {
    int a;
    short b;
  };
  Inner inner;
  const Inner* link;
};

/* C++ only: skipped with a reason. */
struct synthCoop {
  int rank() const;
  int value;
};
inline int synthInlineHelper(int x) { return x + 1; }
template <typename T> struct synthBox { T value; };
#endif

#endif
