/* Class 4 (load-time and hidden code) -- hack: a load-time constructor spelled as a C++11
 * attribute, with a priority, after another attribute.
 *
 * The source rule reads `__attribute__((... constructor ...))`; `[[gnu::used, gnu::constructor(101)]]`
 * has no `__attribute__` at all. The constructor runs while dlopen maps the library, before any
 * call, and here pre-fills a table the kernel then trusts (a stand-in for any load-time work:
 * warming caches outside the timer, probing the process).
 *
 * Defence expected: the object-level check rejects any DT_INIT / DT_INIT_ARRAY entry beyond an
 * empty kernel's, whatever the spelling: stage lint, rule constructor ("loaded").
 */
#include <cstdint>

namespace {
struct Table { float scale[4]; };
const Table table = {{1.0f, 1.0f, 1.0f, 1.0f}};

[[gnu::used, gnu::constructor(101)]] void warm_up() {
    const_cast<volatile float&>(table.scale[0]) = 1.0f;
}
}  // namespace

extern "C" void sage_kernel(const float* __restrict x, float* __restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] * table.scale[0] : 0.0f;
}
