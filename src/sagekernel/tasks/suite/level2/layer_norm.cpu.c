#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,
                 float* restrict out, int64_t B, int64_t D, float eps) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float mean = 0.0f;
        for (int64_t d = 0; d < D; ++d) mean += row[d];
        mean /= (float)D;
        float var = 0.0f;
        for (int64_t d = 0; d < D; ++d) { float c = row[d] - mean; var += c * c; }
        var /= (float)D;
        float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t d = 0; d < D; ++d) out[b * D + d] = (row[d] - mean) * rstd * weight[d] + bias[d];
    }
}
