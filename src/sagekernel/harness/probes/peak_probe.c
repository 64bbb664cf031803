/* The CPU peak probe (harness/peaks.py): one thread's sustained memory bandwidth (STREAM triad,
 * a[i] = b[i] + s * c[i], arrays far larger than the last-level cache) and its fused multiply-add
 * throughput (independent FMA chains on the widest vectors the compiler targets with
 * -march=native). Prints one JSON object. Best of REPEATS timings of each, as STREAM reports.
 * The triad is timed at several working-set sizes (argv), so that a task whose data fits in a cache
 * is bounded by that cache's bandwidth, not the DRAM's. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VEC_BYTES
#define VEC_BYTES 64
#endif
#define LANES (VEC_BYTES / 4)
#define REPEATS 7

typedef float vf __attribute__((vector_size(VEC_BYTES)));

/* The thread's CPU time, not the wall clock: on a shared machine a preempted probe would read
 * low, and the harness charges a CPU kernel its kernel-accounted run time too. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Triad over three arrays of n doubles (a working set of 24 n bytes), swept `sweeps` times per
 * timing so that even a cache-sized set is timed over tens of milliseconds. */
static double triad(size_t n, long sweeps) {
    double *a = aligned_alloc(64, n * sizeof(double));
    double *b = aligned_alloc(64, n * sizeof(double));
    double *c = aligned_alloc(64, n * sizeof(double));
    if (!a || !b || !c) return -1.0;
    for (size_t i = 0; i < n; i++) { a[i] = 0.0; b[i] = 1.0; c[i] = 2.0; }
    double best = 1e30, s = 3.0;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now();
        for (long k = 0; k < sweeps; k++) {
            for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
            __asm__ volatile("" : : "r"(a) : "memory");
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    double check = a[n / 2];
    free(a); free(b); free(c);
    if (check != 7.0) return -1.0;
    return 3.0 * sizeof(double) * (double)n * (double)sweeps / best; /* bytes per second, STREAM's count */
}

/* CHAINS independent accumulators in named registers (an array would be spilled to the stack):
 * enough to cover the FMA latency times the FMA units of current x86 and Arm cores. */
#define CHAINS 12
#define STEP(a) a = a * x + y
static double fma_rate(long iters) {
    vf x, y;
    for (int l = 0; l < LANES; l++) { x[l] = 1.0000001f; y[l] = 1e-7f; }
    vf a0 = x, a1 = x * 2, a2 = x * 3, a3 = x * 4, a4 = x * 5, a5 = x * 6;
    vf a6 = x * 7, a7 = x * 8, a8 = x * 9, a9 = x * 10, a10 = x * 11, a11 = x * 12;
    double best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5);
            STEP(a6); STEP(a7); STEP(a8); STEP(a9); STEP(a10); STEP(a11);
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    vf all = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    float sink = 0;
    for (int l = 0; l < LANES; l++) sink += all[l];
    /* two floating-point operations per lane per FMA */
    double rate = 2.0 * LANES * CHAINS * (double)iters / best;
    return sink == sink ? rate : -1.0;
}

/* argv: FMA iterations, then working-set sizes in bytes (each timed with the triad). */
int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 20000000L;
    double fl = fma_rate(iters);
    printf("{\"fma_flops_per_s\": %.6e, \"fma_iterations\": %ld, \"vector_bytes\": %d, \"chains\": %d, "
           "\"repeats\": %d, \"triad\": [", fl, iters, VEC_BYTES, CHAINS, REPEATS);
    int ok = fl > 0;
    for (int k = 2; k < argc; k++) {
        size_t bytes = (size_t)atoll(argv[k]);
        size_t n = bytes / 24 > 1024 ? bytes / 24 : 1024;
        long sweeps = (long)(2e8 / (24.0 * n)) + 1; /* about 200 MB of traffic per timing */
        double bw = triad(n, sweeps);
        ok = ok && bw > 0;
        printf("%s{\"working_set_bytes\": %zu, \"bytes_per_s\": %.6e}", k > 2 ? ", " : "", 24 * n, bw);
    }
    printf("]}\n");
    return ok ? 0 : 1;
}
