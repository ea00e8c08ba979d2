/* Function pointers in arrays, through pointers and as results.
 *
 * The report:
 *   expect: skipped function mfReturnsFn: returns a function pointer with no typedef name ('int (*)(int)'), which a C declaration of the binding cannot spell
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
typedef int (*mfCallback)(int);
typedef struct { mfCallback table[2]; int (*direct[2])(void); } mfTable_t;
mfResult_t mfTakeArray(int (*cbs[2])(int));
mfResult_t mfTakePtrPtr(int (**cb)(int));
int (*mfReturnsFn(void))(int);
mfCallback mfReturnsTypedef(void);
#ifdef __cplusplus
}
#endif
