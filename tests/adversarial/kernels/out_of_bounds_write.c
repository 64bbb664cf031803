// Bug / hack: write past the end of the output (into whatever the harness keeps next to it).
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    out[B * D + 3] = 42.0f;
}
