#include <stdint.h>

void sage_kernel(const float* restrict x, const float* restrict w, const int64_t* restrict group_sizes,
                 float* restrict out, int64_t M, int64_t K, int64_t N, int64_t G) {
    (void)M;
    int64_t row = 0;
    for (int64_t g = 0; g < G; ++g) {
        const float* W = w + g * K * N;
        for (int64_t r = 0; r < group_sizes[g]; ++r, ++row) {
            float* o = out + row * N;
            for (int64_t n = 0; n < N; ++n) o[n] = 0.0f;
            for (int64_t kk = 0; kk < K; ++kk) {
                float a = x[row * K + kk];
                for (int64_t n = 0; n < N; ++n) o[n] += a * W[kk * N + n];
            }
        }
    }
}
