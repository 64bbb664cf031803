#include <stdint.h>

void sage_kernel(const int8_t* restrict q, const float* restrict scale, const int32_t* restrict zero_point,
                 float* restrict out, int64_t M, int64_t N) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
            out[m * N + n] = (float)((int32_t)q[m * N + n] - zero_point[n]) * scale[n];
}
