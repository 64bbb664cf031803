#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict q, const float* restrict k, const float* restrict v,
                 float* restrict out, int64_t B, int64_t H, int64_t S, int64_t D, float scale) {
    float acc[D];
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const float* Q = q + bh * S * D;
        const float* K = k + bh * S * D;
        const float* V = v + bh * S * D;
        float* O = out + bh * S * D;
        for (int64_t i = 0; i < S; ++i) {
            float m = -INFINITY, l = 0.0f;
            for (int64_t d = 0; d < D; ++d) acc[d] = 0.0f;
            for (int64_t j = 0; j <= i; ++j) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d) s += Q[i * D + d] * K[j * D + d];
                s *= scale;
                float m_new = s > m ? s : m;
                float corr = expf(m - m_new);
                float p = expf(s - m_new);
                l = l * corr + p;
                for (int64_t d = 0; d < D; ++d) acc[d] = acc[d] * corr + p * V[j * D + d];
                m = m_new;
            }
            for (int64_t d = 0; d < D; ++d) O[i * D + d] = acc[d] / l;
        }
    }
}
