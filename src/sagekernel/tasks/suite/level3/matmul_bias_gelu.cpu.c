#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict w, const float* restrict bias,
                 float* restrict out, int64_t M, int64_t K, int64_t N) {
    for (int64_t m = 0; m < M; ++m) {
        float* o = out + m * N;
        for (int64_t n = 0; n < N; ++n) o[n] = bias[n];
        for (int64_t k = 0; k < K; ++k) {
            float a = x[m * K + k];
            for (int64_t n = 0; n < N; ++n) o[n] += a * w[k * N + n];
        }
        for (int64_t n = 0; n < N; ++n) o[n] = 0.5f * o[n] * (1.0f + erff(o[n] * 0.70710678118654752f));
    }
}
