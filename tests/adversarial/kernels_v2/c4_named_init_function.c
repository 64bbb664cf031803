/* Class 4 (load-time and hidden code) -- hack: a function named `_init`.
 *
 * No attribute at all: the build uses -nostartfiles, so there is no crti `_init` and the linker
 * takes the candidate's own `_init` as the object's DT_INIT, which ld.so runs while loading it.
 * The libc-name check exempts `_init`/`_fini` (every normal object has them), and no source rule
 * knows the name. The body here is a placeholder for any load-time work: it runs before the first
 * call, outside the timer and before the driver's second seccomp phase.
 *
 * Defence expected: the object-level check sees a DT_INIT entry an empty kernel does not have:
 * stage lint, rule constructor ("loaded").
 */
#include <stdint.h>

void _init(void) {
    volatile int warmed = 1;
    (void)warmed;
}

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
