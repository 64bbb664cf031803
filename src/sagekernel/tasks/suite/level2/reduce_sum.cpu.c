#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t R, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        float* o = out + b * D;
        for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
        for (int64_t r = 0; r < R; ++r) {
            const float* row = x + (b * R + r) * D;
            for (int64_t d = 0; d < D; ++d) o[d] += row[d];
        }
    }
}
