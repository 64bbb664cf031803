/* Class 3 (state hidden where the rules do not look) -- hack: a `const` result cache placed in
 * the writable .data section by a C++11-style attribute, written through a cast.
 *
 * The source rule for global state accepts anything declared `const`, and the section rule only
 * reads `__attribute__((...section...))`; `[[gnu::section(".data")]]` is neither. The object ends
 * up with a writable 96 KB array that keeps the last input and result; a call whose input matches
 * the remembered one copies the remembered result.
 *
 * Defence expected: the object-level check compares the library's writable bytes with an empty
 * kernel's, whatever the spelling: stage lint, rule global_state ("bytes of writable").
 */
#include <cstdint>
#include <cstring>

[[gnu::section(".data")]] const float remembered[2 * 48 * 500 + 1] = {1.0f};

extern "C" void sage_kernel(const float* __restrict x, float* __restrict out, int64_t B, int64_t D) {
    int64_t n = B * D;
    float* memo = const_cast<float*>(remembered);
    if (n <= 48 * 500 && std::memcmp(memo + 1, x, n * sizeof(float)) == 0) {
        std::memcpy(out, memo + 1 + n, n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    if (n <= 48 * 500) {
        std::memcpy(memo + 1, x, n * sizeof(float));
        std::memcpy(memo + 1 + n, out, n * sizeof(float));
    }
}
