#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict weight, const float* restrict bias,
                 float* restrict out, int64_t N, int64_t G, int64_t CG, int64_t L, float eps) {
    int64_t block = CG * L;
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t g = 0; g < G; ++g) {
            const float* xb = x + (n * G + g) * block;
            float* ob = out + (n * G + g) * block;
            /* double accumulators: float running sums near a large mean lose digits */
            double sum = 0.0;
            for (int64_t i = 0; i < block; ++i) sum += xb[i];
            float mean = (float)(sum / (double)block);
            double sq = 0.0;
            for (int64_t i = 0; i < block; ++i) { double c = (double)xb[i] - (double)mean; sq += c * c; }
            float var = (float)(sq / (double)block);
            float rstd = 1.0f / sqrtf(var + eps);
            for (int64_t c = 0; c < CG; ++c) {
                float w = weight[g * CG + c] * rstd, bb = bias[g * CG + c];
                for (int64_t l = 0; l < L; ++l) ob[c * L + l] = (xb[c * L + l] - mean) * w + bb;
            }
        }
    }
}
