#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,
                 float* restrict out, int64_t B, int64_t D, float eps) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        /* double accumulators: a float running sum of D values near a large mean loses digits */
        double sum = 0.0;
        for (int64_t d = 0; d < D; ++d) sum += row[d];
        float mean = (float)(sum / (double)D);
        double sq = 0.0;
        for (int64_t d = 0; d < D; ++d) { double c = (double)row[d] - (double)mean; sq += c * c; }
        float var = (float)(sq / (double)D);
        float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t d = 0; d < D; ++d) out[b * D + d] = (row[d] - mean) * rstd * weight[d] + bias[d];
    }
}
