#include <stdint.h>

void sage_kernel(const float* restrict pred, const float* restrict target, float* restrict out,
                 int64_t B, int64_t D) {
    float total = 0.0f;
    for (int64_t b = 0; b < B; ++b) {
        float row = 0.0f;
        for (int64_t d = 0; d < D; ++d) { float e = pred[b * D + d] - target[b * D + d]; row += e * e; }
        total += row;
    }
    out[0] = total / (float)(B * D);
}
