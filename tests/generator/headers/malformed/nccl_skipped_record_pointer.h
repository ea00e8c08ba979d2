/* Records that are not mirrored (packed, flexible array, unnamed) but used: through a
 * pointer they become opaque pointers; by value, the function goes.
 *
 * The report:
 *   expect: skipped function mfPackedByValue: parameter p is mfPacked_t by value, which is not bound
 *   expect: skipped function mfReturnPacked: the result is mfPacked_t by value, which is not bound
 *   expect: skipped function mfUseAnon: parameter h uses mfAnonHandle_t, which is skipped (uses (unnamed struct at nccl_skipped_record_pointer.h:21), which is not a bound NCCL type)
 *   expect: skipped record (unnamed struct at nccl_skipped_record_pointer.h:21): unnamed record that no typedef names
 *   expect: skipped record mfHolder_t: mfHolder_t.inner holds mfPacked_t by value, which is not bound
 *   expect: skipped struct_decl mfFlex_t: type 'int[]' (INCOMPLETEARRAY) has no IR form
 *   expect: skipped struct_decl mfPacked_t: mfPacked_t: packed record (align 1 < 4 of its members): not mirrored
 *   expect: skipped typedef_decl mfAnonHandle_t: uses (unnamed struct at nccl_skipped_record_pointer.h:21), which is not a bound NCCL type
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
typedef struct __attribute__((packed)) { char c; int x; } mfPacked_t;
typedef struct { int n; int data[]; } mfFlex_t;
typedef struct { int a; } *mfAnonHandle_t;
mfResult_t mfUsePacked(mfPacked_t* p);
mfResult_t mfUseFlex(const mfFlex_t* f);
mfResult_t mfPackedByValue(mfPacked_t p);
mfPacked_t mfReturnPacked(void);
mfResult_t mfUseAnon(mfAnonHandle_t h);
typedef struct { mfPacked_t inner; int y; } mfHolder_t;
#ifdef __cplusplus
}
#endif
