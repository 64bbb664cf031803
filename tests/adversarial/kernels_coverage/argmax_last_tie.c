/* Ties broken the other way (task argmax): `>=` keeps the last of equal maxima, torch.argmax the
 * first. Random normal inputs never tie, so it passed.
 *
 * Defence expected: the ties trial (repeated values): stage correctness, "ties".
 */
#include <stdint.h>

void sage_kernel(const float* restrict x, int64_t* restrict out, int64_t B, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        const float* row = x + b * D;
        int64_t best = 0;
        for (int64_t d = 1; d < D && row[best] == row[best]; ++d)
            if (row[d] >= row[best] || row[d] != row[d]) best = d;
        out[b] = best;
    }
}
