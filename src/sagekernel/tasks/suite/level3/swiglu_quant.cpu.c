#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict gate, const float* restrict up, const float* restrict scale,
                 int8_t* restrict q, int64_t M, int64_t H) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t h = 0; h < H; ++h) {
            float g = gate[m * H + h];
            float y = g / (1.0f + expf(-g)) * up[m * H + h];
            float r = nearbyintf(y / scale[h]);
            r = r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r);
            q[m * H + h] = (int8_t)r;
        }
    }
}
