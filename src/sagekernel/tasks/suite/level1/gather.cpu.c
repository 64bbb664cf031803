#include <stdint.h>

void sage_kernel(const float* restrict x, const int64_t* restrict index, float* restrict out,
                 int64_t B, int64_t D, int64_t K) {
    for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < K; ++k)
            out[b * K + k] = x[b * D + index[b * K + k]];
}
