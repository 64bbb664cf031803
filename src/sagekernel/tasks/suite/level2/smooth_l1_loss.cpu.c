#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict pred, const float* restrict target, float* restrict out,
                 int64_t B, int64_t D, float beta) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) {
        float d = pred[i] - target[i];
        float a = fabsf(d);
        out[i] = a < beta ? 0.5f * d * d / beta : a - 0.5f * beta;
    }
}
