/* Wrong on small outputs (task exp): results below exp(-7) ~ 9e-4 flushed to zero ("they are
 * negligible"). Only heavy-tailed and large-magnitude trials reach x < -7, and there PyTorch's own
 * float32 error on the huge outputs (e^20 and up) was applied as slack to every element.
 *
 * Defence expected: the slack is elementwise (by output magnitude): stage correctness, "wrong
 * result".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] < -7.0f ? 0.0f : expf(x[i]);
}
