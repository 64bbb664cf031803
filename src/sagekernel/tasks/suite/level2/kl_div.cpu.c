#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict log_q, const float* restrict p, float* restrict out,
                 int64_t B, int64_t D) {
    float total = 0.0f;
    for (int64_t b = 0; b < B; ++b) {
        float row = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            float t = p[b * D + d];
            if (t > 0.0f) row += t * (logf(t) - log_q[b * D + d]);
        }
        total += row;
    }
    out[0] = total / (float)B;
}
