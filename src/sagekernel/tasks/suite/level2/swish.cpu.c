#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D, float beta) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v / (1.0f + expf(-beta * v));
    }
}
