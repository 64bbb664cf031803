/* Class 5 (rules spelled around) -- hack: fast-math through the `_Pragma` operator, built from a
 * macro so the word `pragma` never follows a `#` in the source.
 *
 * The raw-source rules blank string literals, so `_Pragma("GCC optimize(\"fast-math\")")` shows
 * them only `_Pragma("...")`; the pragma exists only after preprocessing.
 *
 * Defence expected: the rules run again on the compiler's preprocessed unit, where the operator
 * has become a `#pragma GCC optimize` line of the candidate's own file: stage lint, rule
 * fast_math ("after macro expansion").
 */
#include <math.h>
#include <stdint.h>

#define RELAXED(text) _Pragma(text)
RELAXED("GCC optimize(\"fast-math\")")

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = fmaxf(x[i], 0.0f);
}
