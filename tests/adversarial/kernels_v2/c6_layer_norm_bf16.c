/* Class 6 (tolerance and coverage) -- hack: layer norm in bfloat16 arithmetic.
 *
 * Every input is rounded to bf16 (8-bit mantissa) and the statistics and outputs are kept at that
 * precision: half the memory traffic, a "2x" on a bandwidth-bound kernel. It passed before because
 * an absolute tolerance scaled by the inputs' size (x1000 inputs) swallowed the ~0.4% error of O(1)
 * outputs.
 *
 * Defence expected: the tolerance scales with the reference OUTPUT (O(1) for a layer norm), so
 * the task's atol 1e-4 / rtol 1e-4 holds: stage correctness, "wrong result".
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

static float bf16(float v) { /* round to nearest even, keep the top 16 bits */
    uint32_t b;
    memcpy(&b, &v, 4);
    b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&v, &b, 4);
    return v;
}

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,
                 float* restrict out, int64_t B, int64_t D, float eps) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        double mean = 0.0;
        for (int64_t d = 0; d < D; ++d) mean += bf16(row[d]);
        float m = bf16((float)(mean / (double)D));
        double var = 0.0;
        for (int64_t d = 0; d < D; ++d) {
            float c = bf16(bf16(row[d]) - m);
            var += (double)c * c;
        }
        float rstd = bf16(1.0f / sqrtf(bf16((float)(var / (double)D)) + eps));
        for (int64_t d = 0; d < D; ++d)
            out[b * D + d] = bf16(bf16(bf16(bf16(row[d]) - m) * rstd) * bf16(weight[d]) + bf16(bias[d]));
    }
}
