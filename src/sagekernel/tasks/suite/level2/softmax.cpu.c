#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float* o = out + b * D;
        float m = row[0];
        for (int64_t d = 1; d < D; ++d) m = row[d] > m ? row[d] : m;
        float s = 0.0f;
        for (int64_t d = 0; d < D; ++d) { o[d] = expf(row[d] - m); s += o[d]; }
        float inv = 1.0f / s;
        for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    }
}
