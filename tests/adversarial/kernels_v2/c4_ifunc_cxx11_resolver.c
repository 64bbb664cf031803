/* Class 4 (load-time and hidden code) -- hack: an ifunc spelled as a C++11 attribute.
 *
 * `[[gnu::ifunc("pick")]]` names the resolver without the `__attribute__((ifunc ...))` spelling
 * the source rule reads. The resolver runs inside dlopen, before the kernel is ever called (in
 * the driver's first, looser seccomp phase, where read-only opens are still allowed).
 *
 * Defence expected: the object-level check rejects every ifunc symbol and IRELATIVE relocation:
 * stage lint, rule ifunc ("indirect functions").
 */
#include <cstdint>

extern "C" {
typedef void KernelFn(const float*, float*, int64_t, int64_t);

static void relu_plain(const float* __restrict x, float* __restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static KernelFn* pick() {
    volatile int resolved_at_load = 1; /* runs while the library is being loaded */
    (void)resolved_at_load;
    return relu_plain;
}

[[gnu::ifunc("pick")]] void sage_kernel(const float* __restrict x, float* __restrict out, int64_t B, int64_t D);
}
