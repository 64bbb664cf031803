#include <stdint.h>

void sage_kernel(float* restrict out, int64_t N, float start, float end) {
    float step = (end - start) / (float)(N - 1);
    for (int64_t i = 0; i < N; ++i) out[i] = start + (float)i * step;
    out[N - 1] = end;
}
