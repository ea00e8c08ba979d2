/* A variadic function: a call through a fixed-signature pointer drops its varargs.
 *
 * The report:
 *   expect: skipped function mfLogf: variadic function (...): the bindings call through a pointer of fixed signature, which cannot pass the variable arguments
 *   expect: skipped function mfSetLogger: pointer to a variadic function type 'void (const char *, ...)'
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
mfResult_t mfLogf(const char* fmt, ...);
mfResult_t mfSetLogger(void (*logger)(const char* fmt, ...));
mfResult_t mfFixed(const char* fmt);
#ifdef __cplusplus
}
#endif
