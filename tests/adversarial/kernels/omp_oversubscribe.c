// Hack: ask OpenMP for more threads than the task's thread budget (num_threads clause overrides
// OMP_NUM_THREADS). Writes the right answer only if it really got a team of several threads, so
// a CORRECTNESS failure shows the budget held.
#include <omp.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    int team = 1;
    #pragma omp parallel num_threads(8)
    {
        #pragma omp single
        team = omp_get_num_threads();
    }
    for (int64_t i = 0; i < B * D; ++i) out[i] = team > 1 ? (x[i] > 0.0f ? x[i] : 0.0f) : 0.0f;
}
