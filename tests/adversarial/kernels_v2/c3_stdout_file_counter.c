/* Class 3 (state hidden where the rules do not look) -- hack: a call counter kept in libc's own
 * data, in the spare bytes of the `stdout` FILE structure (glibc's `_unused2`).
 *
 * `stdout` is an allowed import and its FILE structure lives in libc's writable data, not in the
 * candidate's object, so the object's writable-data and TLS checks see nothing, and no static or
 * global appears in the source. The counter survives from call to call; the fresh-process
 * recheck of the correctness stage starts it again at zero, so it cannot tell. The kernel is exact
 * for the first 8 calls of a process (every correctness process runs fewer) and skips the work
 * afterwards, betting that the timing loop only checks the early calls.
 *
 * Defence expected: outputs of calls drawn after every timing round are checked against the
 * parent's reference: stage correctness, "wrong result during timing".
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    uint32_t calls;
    memcpy(&calls, stdout->_unused2, sizeof calls);
    calls++;
    memcpy(stdout->_unused2, &calls, sizeof calls);
    if (calls > 8) return; /* "the harness only checks the first calls" */
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
