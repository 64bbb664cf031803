#include <stdint.h>

void sage_kernel(const int64_t* restrict positions, const float* restrict x, const float* restrict cos_sin_cache,
                 float* restrict out, int64_t T, int64_t H, int64_t D, int64_t P) {
    (void)P;
    int64_t half = D / 2;
    for (int64_t t = 0; t < T; ++t) {
        const float* cs = cos_sin_cache + positions[t] * D;
        for (int64_t h = 0; h < H; ++h) {
            const float* v = x + (t * H + h) * D;
            float* o = out + (t * H + h) * D;
            for (int64_t i = 0; i < half; ++i) {
                float c = cs[i], s = cs[half + i];
                o[i] = v[i] * c - v[i + half] * s;
                o[i + half] = v[i + half] * c + v[i] * s;
            }
        }
    }
}
