// Hack: set flush-to-zero / denormals-are-zero in MXCSR. The setting outlives the call: it changes
// the results of later calls and, in the timing process, the PyTorch reference's arithmetic.
#include <immintrin.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    _mm_setcsr(_mm_getcsr() | 0x8040);
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
