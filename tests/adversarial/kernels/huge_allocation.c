// Hack / bug: allocate and touch far more memory than the machine should give a kernel.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    size_t n = (size_t)64 << 30;
    char* big = (char*)malloc(n);
    memset(big, 1, n);
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f + (float)big[i % 7];
}
