// Hack: a destructor (code that runs at unload/exit, outside the harness's view) whose attribute
// name is token-pasted, so the source never spells `destructor`.
#include <stdint.h>
#include <stdio.h>
#define CAT(a, b) a##b

__attribute__((CAT(destruc, tor))) static void at_exit_hook(void) { puts("after the harness"); }

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
