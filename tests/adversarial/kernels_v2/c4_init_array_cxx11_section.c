/* Class 4 (load-time and hidden code) -- hack: a function pointer placed in .init_array by a
 * C++11-style section attribute, as a `const` object (so the global-state rule accepts it).
 *
 * `[[gnu::used, gnu::section(".init_array")]]` has no `__attribute__` for the source rule to read;
 * the loader runs every .init_array entry while dlopen maps the library.
 *
 * Defence expected: the object-level check sees an init array an empty kernel does not have:
 * stage lint, rule constructor ("loaded").
 */
#include <cstdint>

namespace {
void early() {
    volatile int ran = 1;
    (void)ran;
}
}  // namespace

[[gnu::used, gnu::section(".init_array")]] void (*const early_entry)() = early;

extern "C" void sage_kernel(const float* __restrict x, float* __restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
