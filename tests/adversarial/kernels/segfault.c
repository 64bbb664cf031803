// Crash: write through a NULL pointer.
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    volatile float* bad = (float*)0;
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i];
    bad[B] = 1.0f;
}
