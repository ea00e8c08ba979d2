/* Bitfields wider than their type (C++ pads them; C and Rust have no such member).
 *
 * The report:
 *   expect: skipped struct_decl mfHuge_t: mfHuge_t.huge: a 70-bit bitfield is wider than its type 'unsigned long long' (64 bits)
 *   expect: skipped struct_decl mfOver_t: mfOver_t.over: a 40-bit bitfield is wider than its type 'unsigned int' (32 bits)
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
typedef struct { unsigned int over : 40; } mfOver_t;
typedef struct { unsigned long long huge : 70; } mfHuge_t;
typedef struct { uint64_t wide : 40; uint64_t rest : 24; } mfBits40_t;  /* fits: bound */
mfResult_t mfReadBits(mfBits40_t* bits);
#ifdef __cplusplus
}
#endif
