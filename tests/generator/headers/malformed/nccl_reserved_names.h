/* Names a target language reserves: parameters renamed with a trailing _ everywhere,
 * fields keep their C name and get a trailing _ as Python attributes.
 *
 * The report:
 *   expect: renamed field mfFields_t.None: Python attribute None_: 'None' is reserved in Python
 *   expect: renamed field mfFields_t.lambda: Python attribute lambda_: 'lambda' is reserved in Python
 *   expect: renamed parameter mfClash.in: renamed in__: 'in' is reserved in Python and Rust
 *   expect: renamed parameter mfNames.None: renamed None_: 'None' is reserved in Python
 *   expect: renamed parameter mfNames.fn: renamed fn_: 'fn' is reserved in Rust
 *   expect: renamed parameter mfNames.in: renamed in_: 'in' is reserved in Python and Rust
 *   expect: renamed parameter mfNames.lambda: renamed lambda_: 'lambda' is reserved in Python
 *   expect: renamed parameter mfNames.match: renamed match_: 'match' is reserved in Rust
 *   expect: renamed parameter mfNames.ref: renamed ref_: 'ref' is reserved in Rust
 *   expect: renamed parameter mfNames.restrict: renamed restrict_: 'restrict' is reserved in C
 *   expect: renamed parameter mfNames.self: renamed self_: 'self' is reserved in Rust
 *   expect: renamed parameter mfNames.type: renamed type_: 'type' is reserved in Rust
 */
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { mfSuccess = 0 } mfResult_t;
mfResult_t mfNames(int fn, int in, int None, int lambda, int type, int match, int ref, int self, int restrict);
mfResult_t mfClash(int in, int in_);
mfResult_t mfCount(int* values, int count);
typedef struct { int None; int lambda; int type; int fn; int self; } mfFields_t;
mfResult_t mfFill(mfFields_t* out);
#ifdef __cplusplus
}
#endif
