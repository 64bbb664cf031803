/* Class 5 (rules spelled around) -- hack: fast-math as a C++11 attribute, `[[gnu::optimize]]`.
 *
 * No `__attribute__`, no `#pragma`, and the only mention of fast-math is a string literal, which
 * the source rules blank before matching. The function is compiled with -ffast-math semantics
 * although the target's flags say -fno-fast-math; nothing at run time notices (MXCSR untouched).
 *
 * Defence expected: the fast_math rule on a real parse of the attributes: stage lint, rule
 * fast_math ("fast-math").
 */
#include <cmath>
#include <cstdint>

extern "C" [[gnu::optimize("fast-math")]]
void sage_kernel(const float* __restrict x, float* __restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = std::fmax(x[i], 0.0f);
}
