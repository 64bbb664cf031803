/* Class 5 (rules spelled around) -- hack: fast-math requested as the SECOND attribute of a list.
 *
 * The source rule matches `__attribute__((optimize` only when optimize comes first, and it blanks
 * string literals before matching, so "fast-math" inside optimize("...") is invisible to it.
 * `__attribute__((hot, optimize("fast-math")))` compiles the kernel with -ffast-math semantics
 * (reassociation, no NaN/Inf guarantees) although the target's flags say -fno-fast-math. Nothing
 * at run time notices: fast-math through an attribute does not touch MXCSR.
 *
 * Defence expected: the fast_math rule, checked on a real parse of the attributes (any position,
 * string arguments included): stage lint, rule fast_math ("fast-math").
 */
#include <math.h>
#include <stdint.h>

__attribute__((hot, optimize("fast-math")))
void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = fmaxf(x[i], 0.0f);
}
