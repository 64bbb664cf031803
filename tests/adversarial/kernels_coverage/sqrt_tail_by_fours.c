/* Sloppy tail (task sqrt), written by the lead as a second instance of the residue class: blocks
 * of 16, then the remainder in 4-pieces and a final single element only when exactly one is left.
 * The published element counts leave 0, 13 (= 4+4+4+1) and 1 over, so it passed; a remainder of
 * 2, 3, 6, 7, 10, 11, 14 or 15 leaves elements unwritten.
 *
 * Defence expected: the held-out small shape puts the element count at -1 modulo the vector
 * widths (remainder 15 here): stage correctness, "held-out small".
 */
#include <math.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    int64_t n = B * D, i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; ++k) out[i + k] = sqrtf(x[i + k]);
    while (n - i >= 4) {
        for (int k = 0; k < 4; ++k) out[i + k] = sqrtf(x[i + k]);
        i += 4;
    }
    if (n - i == 1) out[i] = sqrtf(x[i]);
}
