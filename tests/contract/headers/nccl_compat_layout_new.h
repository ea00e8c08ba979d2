/* check-compat's layout pair, new side (3.2.0): each struct of nccl_compat_layout_old.h
 * changed one way; every change breaks code built against 3.1.0, none is dropped. */
#ifndef NCCL_COMPAT_LAYOUT_H_
#define NCCL_COMPAT_LAYOUT_H_

/* Still 16 bytes: flags went into the old tail padding. */
typedef struct {
  double weight;
  int rank;
  int flags;
} compatSlot_t;

/* Still 16 bytes: hole went into the padding between a and b. */
typedef struct {
  int a;
  int hole;
  double b;
} compatGap_t;

typedef struct {
  long count;
} compatRetyped_t;

typedef struct {
  int kept;
} compatShrunk_t;

typedef struct {
  int peer;
  int label;
} compatRenamed_t;

typedef struct {
  unsigned int ready : 1;
  unsigned int mode : 5;
} compatBits_t;

#endif
