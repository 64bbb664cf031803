#include <stdint.h>
#include <math.h>

void sage_kernel(const float* restrict logits, const int64_t* restrict target, float* restrict out,
                 int64_t B, int64_t C, float label_smoothing) {
    float total = 0.0f;
    for (int64_t b = 0; b < B; ++b) {
        const float* row = logits + b * C;
        float m = row[0];
        for (int64_t c = 1; c < C; ++c) m = row[c] > m ? row[c] : m;
        float s = 0.0f, sum = 0.0f;
        for (int64_t c = 0; c < C; ++c) { s += expf(row[c] - m); sum += row[c]; }
        float lse = m + logf(s);
        float nll = lse - row[target[b]];
        float smooth = lse - sum / (float)C;
        total += (1.0f - label_smoothing) * nll + label_smoothing * smooth;
    }
    out[0] = total / (float)B;
}
