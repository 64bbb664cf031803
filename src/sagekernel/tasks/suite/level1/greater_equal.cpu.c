#include <stdint.h>

void sage_kernel(const float* restrict x, const float* restrict y, uint8_t* restrict out, int64_t B, int64_t D) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) out[i] = (uint8_t)(x[i] >= y[i] ? 1 : 0);
}
