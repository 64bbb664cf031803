/* Rounding ties the other way (task quantize_per_channel): roundf rounds halfway cases away from
 * zero, torch.round to even. The task's inputs were built to avoid exact halfway values.
 *
 * Defence expected: the task's "rounding_ties" edge case (exact halfway values): stage
 * correctness, "rounding_ties".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, const float* restrict scale, int8_t* restrict q, int64_t M,
                 int64_t N) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float v = roundf(x[m * N + n] / scale[n]);
            v = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
            q[m * N + n] = (int8_t)v;
        }
}
