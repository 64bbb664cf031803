#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict residual, const float* restrict weight,
                 const float* restrict bias, float* restrict y, float* restrict s, int64_t B, int64_t D,
                 float eps) {
    for (int64_t b = 0; b < B; ++b) {
        float* sr = s + b * D;
        /* double accumulators: a float running sum of D values near a large mean loses digits */
        double sum = 0.0;
        for (int64_t d = 0; d < D; ++d) { sr[d] = x[b * D + d] + residual[b * D + d]; sum += sr[d]; }
        float mean = (float)(sum / (double)D);
        double sq = 0.0;
        for (int64_t d = 0; d < D; ++d) { double c = (double)sr[d] - (double)mean; sq += c * c; }
        float var = (float)(sq / (double)D);
        float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t d = 0; d < D; ++d) y[b * D + d] = (sr[d] - mean) * rstd * weight[d] + bias[d];
    }
}
