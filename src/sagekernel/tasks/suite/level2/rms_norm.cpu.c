#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict weight, float* restrict out,
                 int64_t B, int64_t D, float eps) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float ss = 0.0f;
        for (int64_t d = 0; d < D; ++d) ss += row[d] * row[d];
        float r = 1.0f / sqrtf(ss / (float)D + eps);
        for (int64_t d = 0; d < D; ++d) out[b * D + d] = row[d] * r * weight[d];
    }
}
