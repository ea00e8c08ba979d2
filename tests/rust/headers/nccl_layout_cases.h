/* Layouts that the Rust renderer cannot spell directly and plans member by member:
 * bitfields (signed, bool, wide, after other members, zero-width), unnamed members,
 * alignas members, tail padding. Not NCCL; for tests/rust/render_test.py. */
#ifndef NCCL_LAYOUT_CASES_H_
#define NCCL_LAYOUT_CASES_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { caseRed = 0, caseGreen = 1, caseBlue = 2 } caseColor_t;

typedef struct caseBits {
  unsigned int ready : 1;
  unsigned int mode : 3;
  int delta : 5;
  unsigned int : 0;
  unsigned short count : 12;
  bool flag : 1;
  caseColor_t color : 2;
  uint64_t wide : 40;
  char tail;
} caseBits_t;

/* A bitfield sharing its unit with the member before it, and a member after a short run. */
typedef struct caseShared {
  char head;
  int nibble : 4;
  int sign : 2;
  char after;
  unsigned long long last : 3;
} caseShared_t;

typedef struct caseMembers {
  char head;
  union {
    int i;
    float f;
  };
  struct {
    short a;
    short b;
  } pair;
  alignas(16) char space[8];
  int after;
} caseMembers_t;

#ifdef __cplusplus
}
#endif
#endif
