/* Wrong on small outputs (task exp): results below exp(-10) ~ 4.5e-5 flushed to zero ("they are
 * negligible"), still 4x the task's atol. The published inputs (2 N(0, 1)) almost never reach
 * x < -10; the heavy-tailed and large-magnitude trials do, and there PyTorch's own float32 error on
 * the huge outputs (e^20 and up) was applied as slack to every element.
 *
 * Defence expected: the slack is elementwise (by output magnitude): stage correctness, "wrong
 * result".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] < -10.0f ? 0.0f : expf(x[i]);
}
