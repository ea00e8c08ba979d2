/* An incomplete struct by value: no language can pass it.
 *
 * The report:
 *   expect: skipped function mfByValue: parameter v is mfIncomplete by value, an incomplete type
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
struct mfIncomplete;
typedef struct mfIncomplete* mfHandle_t;  /* through a pointer: an opaque handle, bound */
mfResult_t mfByValue(struct mfIncomplete v);
mfResult_t mfByHandle(mfHandle_t h);
#ifdef __cplusplus
}
#endif
