/* check-compat's layout pair, old side (3.1.0): small unversioned structs that
 * nccl_compat_layout_new.h changes one way each, every way that keeps sizeof or
 * otherwise slips past a size check: a field added in the tail padding and one in the
 * padding between two fields, a field retyped, removed, renamed, a bitfield widened.
 * (Size, alignment, offset, bit offset and struct/union changes: nccl_compat_breaks.h.) */
#ifndef NCCL_COMPAT_LAYOUT_H_
#define NCCL_COMPAT_LAYOUT_H_

/* 16 bytes: rank at 8, then 4 bytes of tail padding. */
typedef struct {
  double weight;
  int rank;
} compatSlot_t;

/* 16 bytes: 4 bytes of padding between a and b. */
typedef struct {
  int a;
  double b;
} compatGap_t;

typedef struct {
  int count;
} compatRetyped_t;

typedef struct {
  int kept;
  int dropped;
} compatShrunk_t;

typedef struct {
  int peer;
  int tag;
} compatRenamed_t;

typedef struct {
  unsigned int ready : 1;
  unsigned int mode : 3;
} compatBits_t;

#endif
