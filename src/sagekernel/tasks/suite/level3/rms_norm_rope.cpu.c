#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict cos_emb,
                 const float* restrict sin_emb, float* restrict out, int64_t B, int64_t S, int64_t H, int64_t D,
                 float eps) {
    int64_t half = D / 2;
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t s = 0; s < S; ++s) {
            const float* c = cos_emb + s * D;
            const float* sn = sin_emb + s * D;
            for (int64_t h = 0; h < H; ++h) {
                int64_t base = ((b * S + s) * H + h) * D;
                const float* v = x + base;
                float* o = out + base;
                float ss = 0.0f;
                for (int64_t d = 0; d < D; ++d) ss += v[d] * v[d];
                float r = 1.0f / sqrtf(ss / (float)D + eps);
                for (int64_t d = 0; d < half; ++d) {
                    float lo = v[d] * r * weight[d];
                    float hi = v[d + half] * r * weight[d + half];
                    o[d] = lo * c[d] - hi * sn[d];
                    o[d + half] = hi * c[d + half] + lo * sn[d + half];
                }
            }
        }
    }
}
