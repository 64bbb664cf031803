// Hack/bug: write past the end of the output, beyond a small guard zone (an unmasked, unrolled SIMD
// tail does this), into memory the harness does not look at. A 64-byte guard misses it.
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    for (int64_t i = n + 64; i < n + 72; ++i) out[i] = 0.0f;  // 256-288 bytes past the end
}
