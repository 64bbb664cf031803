/* Class 5 (rules spelled around) -- hack: a parenthesised call to an FP-environment function.
 *
 * The fp_environment rule matches `_mm_setcsr(`; `(_mm_setcsr)(...)` calls the same function
 * through its parenthesised name, which the regex does not match, before or after preprocessing.
 * It sets flush-to-zero and denormals-are-zero and leaves them set: later calls (and, in a shared
 * process, the reference) run with a different arithmetic.
 *
 * Defence expected: the FP environment (MXCSR and the x87 control word) is saved and compared
 * around every call: stage integrity, "floating-point environment".
 */
#include <immintrin.h>
#include <stdint.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    (_mm_setcsr)(_mm_getcsr() | 0x8040);
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
