/* NaN dropped (task clip_by_value), written by the lead as a second instance of the special-values
 * class: fmaxf/fminf return the other operand when one is NaN, so a NaN input comes out as
 * clip_min, where torch.clamp keeps NaN. No published input holds a NaN, so it passed.
 *
 * Defence expected: the special-values trial (NaN among the inputs, compared as NaN):
 * stage correctness, "special_values".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D,
                 float clip_min, float clip_max) {
    int64_t n = B * D;
    for (int64_t i = 0; i < n; ++i) out[i] = fminf(fmaxf(x[i], clip_min), clip_max);
}
