/* By value: a union and an empty struct have no faithful binding (the member read is not in the
 * headers; an empty struct is 0 bytes in C, 1 in C++); ssize_t needs <sys/types.h> in the
 * generated C header, which must compile.
 *
 * The report:
 *   expect: skipped function mfByUnion: parameter v is the union mfValue_t by value: which member the library reads is not in the headers, so no binding can fill it faithfully
 *   expect: skipped function mfByEmpty: parameter e is the empty struct mfEmpty_t by value: 0 bytes in C, 1 in C++, so the two disagree on the call
 *   expect: skipped function mfReturnsUnion: the result is the union mfValue_t by value: which member the library reads is not in the headers, so no binding can fill it faithfully
 */
#include <stdint.h>
#include <sys/types.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
typedef union { int i; float f; } mfValue_t;
typedef struct { } mfEmpty_t;
mfResult_t mfSigned(ssize_t n, ssize_t *out);
mfResult_t mfByUnion(mfValue_t v);
mfResult_t mfByEmpty(mfEmpty_t e);
mfValue_t mfReturnsUnion(void);
mfResult_t mfUnionByPointer(mfValue_t *v);
#ifdef __cplusplus
}
#endif
