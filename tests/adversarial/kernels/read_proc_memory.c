// Hack: scan the process's memory map (/proc/self/maps, then the parent's /proc/<pid>/mem) for the
// reference. Correct output is written only if /proc could be opened, so a pass means the attack worked.
#include <stdint.h>
#include <stdio.h>

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    FILE* maps = fopen("/proc/self/maps", "r");
    for (int64_t i = 0; i < B * D; ++i) out[i] = maps ? (x[i] > 0.0f ? x[i] : 0.0f) : 0.0f;
    if (maps) fclose(maps);
}
