/* Class 4 (load-time and hidden code) -- hack: `target_clones`, which turns the kernel into an
 * ifunc whose resolver runs inside dlopen, before the driver's second seccomp phase and before
 * any call. No constructor, no `ifunc` word in the source for the source rule to see.
 *
 * Defence expected: the object-level check rejects every ifunc symbol and IRELATIVE relocation:
 * stage lint, rule ifunc ("indirect functions").
 */
#include <stdint.h>

__attribute__((target_clones("avx2", "default")))
void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
