/* Types with no IR form: each declaration using one is skipped by name.
 *
 * The report:
 *   expect: skipped function mfHalf: type '_Float16' (clang type kind 32) has no IR form
 *   expect: skipped function mfInt128: type '__int128' (INT128) has no IR form
 *   expect: skipped function mfLongDouble: type 'long double' (LONGDOUBLE) has no IR form
 *   expect: skipped function mfUseWide: parameter w uses mfWide_t, which is skipped (type 'long double' (LONGDOUBLE) has no IR form)
 *   expect: skipped struct_decl mfHalfRecord_t: type '_Float16' (clang type kind 32) has no IR form
 *   expect: skipped typedef_decl mfFnType: type 'int (int)' (FUNCTIONPROTO) has no IR form
 *   expect: skipped typedef_decl mfWide_t: type 'long double' (LONGDOUBLE) has no IR form
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
mfResult_t mfHalf(_Float16 h);
mfResult_t mfInt128(__int128 x);
mfResult_t mfLongDouble(long double x);
typedef int mfFnType(int);
mfResult_t mfUseFnType(mfFnType* cb);  /* a pointer to it is an ordinary function pointer: bound */
typedef struct { _Float16 h; int x; } mfHalfRecord_t;
mfResult_t mfUseHalfRecord(mfHalfRecord_t* r);
typedef long double mfWide_t;
mfResult_t mfUseWide(mfWide_t w);
#ifdef __cplusplus
}
#endif
