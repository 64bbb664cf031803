#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict gate, const float* restrict up, float* restrict out,
                 int64_t B, int64_t H) {
    int64_t n = B * H;
    for (int64_t i = 0; i < n; ++i) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
