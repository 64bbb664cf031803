/* Class 3 (state hidden where the rules do not look) -- hack: a call counter kept in stack residue
 * far below the kernel's frame, past the region the driver poisons.
 *
 * The driver poisons the 64 KB of stack below its frame before every call. The kernel's frame
 * holds a 256 KB volatile scratch array; its far end (~200 KB down) is never poisoned, and every
 * call from the driver's loop lands at the same depth, so a counter written there survives from
 * call to call. The kernel does the work only for the first 8 calls of a process.
 *
 * Defence expected: whatever survives on the stack, the outputs of calls drawn after every
 * timing round are checked: stage correctness, "wrong result during timing". (The residue itself
 * is not detected: the poison covers 64 KB only.)
 */
#include <stdint.h>

#define SCRATCH (256 * 1024)
#define MAGIC 0x5a6e737461636b31ull

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    volatile uint64_t scratch[SCRATCH / 8];
    volatile uint64_t* deep = &scratch[64]; /* the lowest addresses of the array: deepest on the stack */
    uint64_t calls = deep[0] == MAGIC ? deep[1] + 1 : 1;
    deep[0] = MAGIC;
    deep[1] = calls;
    scratch[SCRATCH / 8 - 1] = 0; /* touch the top so the whole frame is really there */
    if (calls > 8) return;
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
