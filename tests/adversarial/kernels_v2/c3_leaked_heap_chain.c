/* Class 3 (state hidden where the rules do not look) -- hack: cross-call state in heap blocks
 * that are never freed, found again by address arithmetic.
 *
 * The driver perturbs freed memory (M_PERTURB), so malloc/free reuse carries nothing. This kernel
 * never frees: each call leaks one 64-byte note (magic + call count) and finds the previous
 * call's note right below its own (consecutive same-size allocations from the top chunk are
 * adjacent: 0x50 bytes apart), so it knows how many calls this process has made. No writable data,
 * no TLS, no static, no errno, no stack residue. From the second call of a process on it takes a
 * "cheaper" path (the lowest mantissa bit dropped: well inside the tolerance, so a tolerance check
 * alone never sees it), i.e. its result depends on the call history.
 *
 * Defence expected: the default shape runs again in a fresh process in reverse order and every
 * output must match bit for bit: stage correctness, "not deterministic" (flag cross_call_state).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NOTE_MAGIC 0x5a6e6e6f74653031ull
#define CHUNK_STRIDE 0x50 /* malloc(64): 64 bytes + header, 16-aligned */

typedef struct { uint64_t magic, calls, spare[6]; } Note;

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    volatile Note* note = (volatile Note*)malloc(sizeof(Note)); /* volatile: the stores must stay */
    volatile uintptr_t below = (uintptr_t)note - CHUNK_STRIDE; /* opaque to the optimiser */
    const volatile Note* before = (const volatile Note*)below;
    uint64_t calls = before->magic == NOTE_MAGIC ? before->calls + 1 : 1;
    note->magic = NOTE_MAGIC;
    note->calls = calls;
    for (int64_t i = 0; i < B * D; ++i) {
        float v = x[i] > 0.0f ? x[i] : 0.0f;
        if (calls > 1) {
            uint32_t bits;
            memcpy(&bits, &v, 4);
            bits &= ~1u;
            memcpy(&v, &bits, 4);
        }
        out[i] = v;
    }
}
