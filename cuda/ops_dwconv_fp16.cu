/* ops_dwconv_fp16.cu — the fp16 launchers of ops_dwconv.cu, compiled as a unit of their own so that the two
 * halves of that file build at once (ops_dwconv.cu's opening comment says why). */
#define OPS_DWCONV_FP16 1
#include "ops_dwconv.cu"
