/* Class 7 (implausible speedups) -- hack: guess which timed calls go unchecked and skip them.
 *
 * Rechecks used to be rare (a call was rechecked with probability 0.2), so a kernel that does the
 * work in only some timed calls mostly got away with it, and its speedup looked real. This kernel
 * keeps a call counter in stack residue far below the driver's poisoned 64 KB (see
 * c3_deep_stack_counter); once a process has made more than 8 calls (only a timing run does) it
 * computes only 3 of every 10 consecutive calls and leaves the rest unwritten: a "3x" on top of
 * whatever the kernel really achieves.
 *
 * Defence expected: in every round the outputs of calls drawn AFTER the round are checked (2 of
 * 10 here), so a skipped call is found (the chance that every draw of 4 rounds lands on computed
 * calls is about (3/45)^4, 2e-5): stage correctness, "wrong result during timing".
 */
#include <stdint.h>

#define SCRATCH (256 * 1024)
#define MAGIC 0x5a6e736b69703031ull

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    volatile uint64_t scratch[SCRATCH / 8];
    volatile uint64_t* deep = &scratch[64];
    uint64_t calls = deep[0] == MAGIC ? deep[1] + 1 : 1;
    deep[0] = MAGIC;
    deep[1] = calls;
    scratch[SCRATCH / 8 - 1] = 0;
    if (calls > 8 && calls % 10 >= 3) return; /* "nobody looks at these" */
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
