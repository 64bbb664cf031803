#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict mean, float* restrict var, int64_t B, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float m = 0.0f;
        for (int64_t d = 0; d < D; ++d) m += row[d];
        m /= (float)D;
        float v = 0.0f;
        for (int64_t d = 0; d < D; ++d) { float c = row[d] - m; v += c * c; }
        mean[b] = m;
        var[b] = v / (float)(D - 1);
    }
}
