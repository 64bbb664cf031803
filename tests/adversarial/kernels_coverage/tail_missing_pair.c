/* Sloppy tail (task abs): 8 elements per step, then the remainder as a 4-piece and a 1-piece; the
 * 2-piece was forgotten. Every published shape has 0, 1 or 5 left over (64000, 10717, 1089
 * elements), so it passed; a remainder of 2, 3, 6 or 7 leaves elements unwritten.
 *
 * Defence expected: the held-out small shape puts the element count at -1 modulo the vector
 * widths (every tail branch taken): stage correctness, "held-out small".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    int64_t n = B * D, i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) out[i + k] = fabsf(x[i + k]);
    int64_t rem = n - i;
    if (rem & 4) { for (int k = 0; k < 4; ++k) out[i + k] = fabsf(x[i + k]); i += 4; }
    if (rem & 1) { out[i] = fabsf(x[i]); }
}
