/* Attribute compiled in (task clip_by_value): the published bounds -0.5 and 0.75 as constants
 * ("they never change"), the clip_min / clip_max parameters ignored. NaN is kept (as torch.clamp).
 *
 * Defence expected: the attributes trial draws clip_min and clip_max from their declared domains:
 * stage correctness, "attributes".
 */
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D, float clip_min,
                 float clip_max) {
    (void)clip_min;
    (void)clip_max;
    for (int64_t i = 0; i < B * D; ++i) {
        float v = x[i];
        out[i] = v != v ? v : (v < -0.5f ? -0.5f : (v > 0.75f ? 0.75f : v));
    }
}
