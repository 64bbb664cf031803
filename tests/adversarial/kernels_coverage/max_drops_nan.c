/* NaN dropped (task reduce_max): the textbook `x > m ? x : m` loop, which skips every NaN after the
 * first element (the built-in kernel itself was written this way). Inputs never held NaN.
 *
 * Defence expected: the special-values trial (the task declares NaN valid): stage correctness,
 * "special_values".
 */
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        float m = row[0];
        for (int64_t d = 1; d < D; ++d) m = row[d] > m ? row[d] : m;
        out[b] = m;
    }
}
