// Hack / bug: never return.
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    volatile int64_t spin = 0;
    while (spin >= 0) spin = (spin + 1) & 0xffff;
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i];
}
