/* Class 6 (tolerance and coverage) -- hack: layer norm with its own epsilon (1e-3) instead of the
 * task's eps (1e-5), a "more stable" constant that is simply a different operator.
 *
 * On inputs of large variance the eps is invisible (var + 1e-3 ~ var), which is how it passed
 * before; on unit-or-smaller variance (uniform, offset-uniform) the outputs move by ~1e-3.
 *
 * Defence expected: every evaluation covers every value distribution, small-variance ones
 * included, with the tolerance scaled by the O(1) outputs: stage correctness, "wrong result".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,
                 float* restrict out, int64_t B, int64_t D, float eps) {
    (void)eps;
    const double own_eps = 1e-3;
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        double mean = 0.0;
        for (int64_t d = 0; d < D; ++d) mean += row[d];
        mean /= (double)D;
        double var = 0.0;
        for (int64_t d = 0; d < D; ++d) {
            double c = row[d] - mean;
            var += c * c;
        }
        double rstd = 1.0 / sqrt(var / (double)D + own_eps);
        for (int64_t d = 0; d < D; ++d) out[b * D + d] = (float)((row[d] - mean) * rstd * weight[d] + bias[d]);
    }
}
