/* Class 6 (tolerance and coverage) -- hack: single-pass float variance, E[x^2] - E[x]^2.
 *
 * One pass over the row instead of two (a real speedup on a bandwidth-bound kernel), accumulated
 * in float. With a large mean over a unit spread the two terms cancel catastrophically and the
 * variance (hence every output) is wrong -- sometimes negative.
 *
 * Defence expected: the large_offset distribution (|mean| 100..1000, unit spread) is in every
 * evaluation: stage correctness, "wrong result".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,
                 float* restrict out, int64_t B, int64_t D, float eps) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float s = 0.0f, s2 = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            s += row[d];
            s2 += row[d] * row[d];
        }
        float mean = s / (float)D;
        float var = s2 / (float)D - mean * mean;
        float rstd = 1.0f / sqrtf(fmaxf(var, 0.0f) + eps);
        for (int64_t d = 0; d < D; ++d) out[b * D + d] = (row[d] - mean) * rstd * weight[d] + bias[d];
    }
}
