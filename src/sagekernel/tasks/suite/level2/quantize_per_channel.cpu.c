#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, const float* restrict scale, int8_t* restrict q,
                 int64_t M, int64_t N) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float v = nearbyintf(x[m * N + n] / scale[n]);
            v = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
            q[m * N + n] = (int8_t)v;
        }
    }
}
