/* An empty group read as the end of the list (task grouped_matmul): the group loop stops at the
 * first group of size 0, like a zero-terminated list. Random cuts make a group empty in 1-2% of
 * trials, and an empty first group (every row left unwritten) almost never.
 *
 * Defence expected: the task names its edge cases and each gets a trial: stage correctness,
 * "empty_first_group".
 */
#include <stdint.h>

void sage_kernel(const float* restrict x, const float* restrict w, const int64_t* restrict group_sizes,
                 float* restrict out, int64_t M, int64_t K, int64_t N, int64_t G) {
    int64_t start = 0;
    for (int64_t g = 0; g < G && group_sizes[g] != 0; ++g) {
        const float* wg = w + g * K * N;
        for (int64_t m = start; m < start + group_sizes[g]; ++m)
            for (int64_t n = 0; n < N; ++n) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * wg[k * N + n];
                out[m * N + n] = acc;
            }
        start += group_sizes[g];
    }
}
