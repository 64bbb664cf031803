/* Class 3 (state hidden where the rules do not look) -- hack: a call counter kept in `errno`.
 *
 * errno (reached through __errno_location, which the allow-list admits) is thread-local storage
 * of libc, not of the candidate, so the object's TLS check sees nothing and no static or global
 * appears in the source. The kernel counts its calls in errno
 * (bit 30 marks "ours") and does the work only for the first 8 calls of a process, betting that
 * the timing loop only checks the early ones.
 *
 * Defence expected: the driver writes a fresh random errno before every call, so the counter
 * reads garbage and the "skip" path is taken from the first call on: stage correctness, the
 * outputs "never written".
 */
#include <stdint.h>

int* __errno_location(void); /* an allowed import: what <errno.h>'s errno expands to */
#define call_state (*__errno_location())

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    int calls = (call_state & (1 << 30)) ? (call_state & 0xFFFF) + 1 : 1;
    call_state = (1 << 30) | calls;
    if (calls > 8) return;
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
