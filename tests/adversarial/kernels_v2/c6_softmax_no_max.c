/* Class 6 (tolerance and coverage) -- hack: softmax without subtracting the row maximum.
 *
 * Saves a pass over the row. exp(x) overflows float for x > 88, so rows with large values give
 * inf / inf = NaN; it passed once and failed twice on the same task when the distributions a run
 * covered depended on how many trials its shapes left.
 *
 * Defence expected: every evaluation covers the large-magnitude and large-offset distributions:
 * stage correctness, "wrong result".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float s = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            out[b * D + d] = expf(row[d]);
            s += out[b * D + d];
        }
        for (int64_t d = 0; d < D; ++d) out[b * D + d] /= s;
    }
}
