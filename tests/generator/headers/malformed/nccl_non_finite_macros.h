/* Macros that fold to inf or nan: no literal in C, Python or Rust.
 *
 * The report:
 *   expect: skipped macro MF_INF: '( 1.0 / 0.0 )' is inf, which C, Python and Rust have no literal for
 *   expect: skipped macro MF_NAN: '( 0.0 / 0.0 )' is nan, which C, Python and Rust have no literal for
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
#define MF_INF (1.0 / 0.0)
#define MF_NAN (0.0 / 0.0)
#define MF_FINITE 1.5
mfResult_t mfGet(int* x);
#ifdef __cplusplus
}
#endif
