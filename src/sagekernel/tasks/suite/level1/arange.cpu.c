#include <stdint.h>

void sage_kernel(float* restrict out, int64_t N, float start, float step) {
    for (int64_t i = 0; i < N; ++i) out[i] = (float)((double)start + (double)i * (double)step);
}
