#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D,
                 float clip_min, float clip_max) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        v = v < clip_min ? clip_min : v;
        out[i] = v > clip_max ? clip_max : v;
    }
}
