#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict residual, const float* restrict weight,
                 const float* restrict bias, float* restrict y, float* restrict s, int64_t B, int64_t D,
                 float eps) {
    for (int64_t b = 0; b < B; ++b) {
        float* sr = s + b * D;
        float mean = 0.0f;
        for (int64_t d = 0; d < D; ++d) { sr[d] = x[b * D + d] + residual[b * D + d]; mean += sr[d]; }
        mean /= (float)D;
        float var = 0.0f;
        for (int64_t d = 0; d < D; ++d) { float c = sr[d] - mean; var += c * c; }
        var /= (float)D;
        float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t d = 0; d < D; ++d) y[b * D + d] = (sr[d] - mean) * rstd * weight[d] + bias[d];
    }
}
