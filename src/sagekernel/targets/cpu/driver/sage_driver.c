/* The CPU target's runtime: a minimal native driver that loads one candidate kernel and runs the
 * calls the harness asks for (docs/target_seam.md, docs/harness.md "what the candidate can reach").
 *
 * This process holds nothing the verdict trusts. It is supervised: the parent (the harness) writes
 * every call's inputs, output sentinels and guard bytes straight into this process's buffers
 * (/proc/PID/mem) while it is stopped, lets it run the round's calls, and when it stops again
 * (SIGSTOP, which nothing can catch or block) reads back the outputs of the calls it draws, with
 * its own randomness, after the round. The parent's clock is the kernel's accounting of this
 * process's run time between the stops; the per-call CLOCK_MONOTONIC figures this driver sends
 * can only make a candidate look slower. Frames on the result pipe carry no payload and decide
 * nothing: they only say where the driver is.
 *
 * Nothing but libc, libm, libgomp (and the C++ runtime for C++ kernels) shares this address
 * space with the candidate: no Python, no torch, no reference, no expected output, no seed. The
 * process is locked down before any byte of the candidate is mapped: a seccomp allow-list that
 * permits read-only opens for dlopen only, then a stricter one once the symbol is resolved (no
 * file opens, no executable mappings, no processes, no signal handlers at all, no randomness, no
 * sockets, no page protection changes with one thread, no unmapping of an image or of the buffers).
 *
 * The call itself is a generated trampoline (sage_call.h, one per task signature): the C ABI of
 * the kernel is fixed by the task's contract, so no libffi is needed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sage_call.h" /* SAGE_N_PTR, SAGE_N_I64, SAGE_N_F32, SAGE_N_F64, sage_call_kernel() */

#define GUARD 4096
#define TAIL_GUARD 4096
#define GUARD_BYTE 0xA5
#define STACK_POISON (64 * 1024)
#define MAX_ARGS 64

enum { ARG_IN = 0, ARG_OUT = 1, ARG_I64 = 2, ARG_F32 = 3, ARG_F64 = 4 };

typedef struct {
    uint64_t kind, bytes; /* bytes of a buffer, or the raw bits of a scalar */
} Arg;

static int result_fd = -1;
static char nonce[33];

/* ---- I/O ------------------------------------------------------------------------------------- */

static void die(const char *what) {
    dprintf(2, "sage_driver: %s\n", what);
    _exit(2);
}

static void read_exact(int fd, void *dst, size_t n) {
    uint8_t *p = dst;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            die("request truncated");
        }
        p += got;
        n -= (size_t)got;
    }
}

static uint64_t read_u64(int fd) {
    uint64_t v;
    read_exact(fd, &v, 8);
    return v;
}

static void write_all(const void *src, size_t n) {
    const uint8_t *p = src;
    while (n) {
        ssize_t put = write(result_fd, p, n);
        if (put <= 0) {
            if (put < 0 && errno == EINTR) continue;
            _exit(4);
        }
        p += put;
        n -= (size_t)put;
    }
}

/* One frame: u64 length, a JSON line (record + nonce), payload. `record` is `"kind":..,...` */
static void send_frame(const char *record, const void *payload, size_t payload_len) {
    char head[4096];
    int n = snprintf(head, sizeof head, "{%s,\"nonce\":\"%s\"}\n", record, nonce);
    if (n < 0 || (size_t)n >= sizeof head) die("frame too long");
    uint64_t len = (uint64_t)n + payload_len;
    write_all(&len, 8);
    write_all(head, (size_t)n);
    if (payload_len) write_all(payload, payload_len);
}

/* ---- per-call perturbation from the parent's per-round seed (splitmix64) ----------------------- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The buffer size for `nbytes` of data: a head guard, the data, a tail guard, whole pages. The
 * parent computes the same (harness/supervised.py: buffer_size). */
static size_t buffer_size(uint64_t nbytes) {
    return (GUARD + (nbytes ? nbytes : 1) + TAIL_GUARD + 4095) / 4096 * 4096;
}

/* ---- floating-point environment ---------------------------------------------------------------- */

typedef struct {
    uint32_t a;
    uint32_t b;
} FpEnv;

static FpEnv fpenv_read(void) {
    FpEnv e = {0, 0};
#if defined(__x86_64__)
    uint16_t cw;
    __asm__ volatile("stmxcsr %0" : "=m"(e.a));
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    e.b = cw;
    e.a &= ~0x3Fu; /* the sticky exception flags change with any arithmetic; compare modes only */
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    e.a = (uint32_t)fpcr;
#endif
    return e;
}

static void fpenv_write(FpEnv e, uint32_t sticky) {
#if defined(__x86_64__)
    uint32_t mx = e.a | sticky;
    uint16_t cw = (uint16_t)e.b;
    __asm__ volatile("ldmxcsr %0" : : "m"(mx));
    __asm__ volatile("fldcw %0" : : "m"(cw));
#elif defined(__aarch64__)
    uint64_t fpcr = e.a;
    (void)sticky;
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#else
    (void)e;
    (void)sticky;
#endif
}

/* ---- seccomp ----------------------------------------------------------------------------------- */

#if defined(__x86_64__)
#define SAGE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SAGE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))

typedef struct {
    struct sock_filter ins[2048];
    unsigned short n;
} Program;

static void emit(Program *p, struct sock_filter f) {
    if (p->n >= 2048) die("seccomp program too long");
    p->ins[p->n++] = f;
}

static void allow(Program *p, int nr) {
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

/* Allow `nr` only when (args[arg] & mask) is zero (want_set=0) or nonzero (want_set=1). */
static void allow_if(Program *p, int nr, int arg, unsigned mask, int want_set) {
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 4));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
    if (want_set)
        emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
    else
        emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 1, 0));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}


/* ---- the loaded images: no running kernel may unmap, move or make writable a page of them --- */

typedef struct {
    uint64_t lo, hi; /* [lo, hi), page-aligned: from the first to the end of the last PT_LOAD */
} Range;

#define MAX_IMAGES 20
static Range images[MAX_IMAGES];
static int n_images = 0;

static int collect_image(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (start < lo) lo = start;
        if (end > hi) hi = end;
    }
    if (hi == 0) return 0;
    if (n_images == MAX_IMAGES) die("too many loaded images for the seccomp filter");
    images[n_images].lo = lo & ~(uint64_t)4095;
    images[n_images].hi = (hi + 4095) & ~(uint64_t)4095;
    n_images++;
    return 0;
}

/* The block for one syscall whose (arg0 = addr, arg1 = len) names a range: SECCOMP_RET_TRAP when
 * [addr, addr + len) overlaps a loaded image (the driver, ld.so, libc, libm, libgomp, the C++
 * runtime, the vDSO, the candidate), SECCOMP_RET_ALLOW otherwise. 64-bit arithmetic in 32-bit
 * cBPF: M[0..1] = addr (lo, hi), M[2..3] = addr + len with the carry. The kernel rejects a range
 * that wraps, so a wrapped sum never reaches a page. Entered with the preamble's own checks done. */
static void overlap_block(Program *b) {
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ST, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ST, 2));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_X, 0, 2, 0)); /* sum >= addr: no carry */
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 1));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ST, 4));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0) + 4));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ST, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1) + 4));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 4));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ST, 3));
    /* per image, 10 instructions: overlap iff addr < hi && end > lo (unsigned, 64-bit) */
    for (int i = 0; i < n_images; i++) {
        unsigned trap = (unsigned)(10 * (n_images - i) + 1); /* from the block's next image */
        uint32_t hi_hi = (uint32_t)(images[i].hi >> 32), hi_lo = (uint32_t)images[i].hi;
        uint32_t lo_hi = (uint32_t)(images[i].lo >> 32), lo_lo = (uint32_t)images[i].lo;
        emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 1));                  /* r0 */
        emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, hi_hi, 8, 0)); /* r1 */
        emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, hi_hi, 0, 2)); /* r2 */
        emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 0));                  /* r3 */
        emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, hi_lo, 5, 0)); /* r4 */
        emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 3));                  /* r5 */
        emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, lo_hi, (uint8_t)(trap - 7), 0)); /* r6 */
        emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, lo_hi, 0, 2)); /* r7 */
        emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_MEM, 2));                  /* r8 */
        emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, lo_lo, (uint8_t)(trap - 10), 0)); /* r9 */
    }
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
}

/* Syscall `nr` with a range in (arg0, arg1): `preamble` (may be NULL) runs first and may return
 * or fall through; then the overlap block decides. The whole block is skipped for another nr. */
static void allow_outside_images(Program *p, int nr, void (*preamble)(Program *)) {
    Program b;
    b.n = 0;
    if (preamble) preamble(&b);
    overlap_block(&b);
    if (b.n > 255) die("seccomp block too long");
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, (uint8_t)b.n));
    for (unsigned short i = 0; i < b.n; i++) emit(p, b.ins[i]);
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* mprotect (thread budget above one): never PROT_EXEC, and any protection only outside the images
 * and the buffers (thread stacks and arenas are the threads' own pages). */
static void mprotect_preamble(Program *b) {
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
}

/* mremap: realloc moves a block where the kernel likes, never onto a chosen address. */
static void mremap_preamble(Program *b) {
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 2 /* MREMAP_FIXED */, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
}

/* mmap(hint, len, prot without PROT_EXEC, flags without MAP_FIXED*): a hint never replaces a
 * mapping, so this is safe once no page of an image can be unmapped. */
static void allow_mmap_unfixed(Program *p) {
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 6));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2))); /* prot */
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 2, 0));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3))); /* flags */
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED | MAP_FIXED_NOREPLACE, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* The calls a running kernel (and libc, libm, libgomp on its behalf) may make. */
static void allow_running(Program *p, int threads, int loading) {
    int always[] = {SYS_read,         SYS_write,       SYS_brk,
                    SYS_madvise,      SYS_futex,       SYS_clock_gettime, SYS_clock_getres,
                    SYS_gettimeofday, SYS_exit,        SYS_exit_group,    SYS_rt_sigreturn,
                    SYS_rt_sigprocmask, SYS_sched_yield, SYS_sched_getaffinity, SYS_getpid, SYS_gettid,
                    SYS_fstat,        SYS_newfstatat,  SYS_lseek,         SYS_close,      SYS_nanosleep,
                    SYS_clock_nanosleep};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++) allow(p, always[i]);
    /* No randomness: the parent draws everything (which calls are checked, the perturbations), so
     * there is nothing here to steer; a library that asks gets ENOSYS and its own fallback. */
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
    if (loading) { /* dlopen maps the candidate's code and sets its protections */
        allow(p, SYS_munmap);
        allow(p, SYS_mremap);
        allow(p, SYS_mmap);
        allow(p, SYS_mprotect);
    } else {
        /* Running: no page of a loaded image or of the call buffers may be unmapped (a hole the
         * next mmap could fill), moved, or have its protection changed; nothing is mapped at a
         * chosen address or executable. With one thread nothing needs mprotect at all; with more,
         * thread stacks and arenas need PROT_WRITE on pages of their own, outside those ranges. */
        allow_outside_images(p, SYS_munmap, NULL);
        allow_outside_images(p, SYS_mremap, mremap_preamble);
        allow_mmap_unfixed(p);
        if (threads > 1) allow_outside_images(p, SYS_mprotect, mprotect_preamble);
    }
    /* rt_sigaction is not allowed at all: the driver's SIGSYS handler is installed before the first
     * filter, and a candidate with a handler (SIGSEGV after making a page unreadable, SIGALRM...)
     * would run code at moments of its choosing. Without one, a fault ends the process. */
    /* abort() and raise() signal this process itself, never another */
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_tgkill, 0, 4));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)getpid(), 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    if (threads > 1) {                           /* OpenMP teams: threads, never processes */
        allow_if(p, SYS_clone, 0, CLONE_THREAD, 1);
#ifdef SYS_clone3
        /* clone3's flags live in memory seccomp cannot read: answer ENOSYS, glibc falls back to clone */
        emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
        emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
#endif
        allow(p, SYS_set_robust_list);
#ifdef SYS_rseq
        allow(p, SYS_rseq);
#endif
    }
}

static void install(Program *p) {
    struct sock_fprog prog = {.len = p->n, .filter = p->ins};
    static int no_new_privs = 0;
    if (!no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs failed");
    no_new_privs = 1;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) die("seccomp failed");
}

static void start(Program *p) {
    p->n = 0;
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SAGE_AUDIT_ARCH, 1, 0));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

static void finish(Program *p) { emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)); }

/* Phase 1, before the candidate is mapped: what dlopen needs, read-only opens included. */
static void lock_loading(int threads) {
    Program p;
    start(&p);
    allow_running(&p, threads, 1);
    allow_if(&p, SYS_openat, 2, 0x3 | 0x40 | 0x200 | 0x400, 0); /* O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND */
    allow(&p, SYS_pread64);
    allow(&p, SYS_seccomp); /* to install phase 2 (a filter can only ever narrow what is allowed) */
    finish(&p);
    install(&p);
}

/* Phase 2, once the kernel symbol is resolved: the running allow-list alone. */
static void lock_running(int threads) {
    Program p;
    start(&p);
    allow_running(&p, threads, 0);
    finish(&p);
    install(&p);
}

static void on_sigsys(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)ctx;
    char rec[128];
    snprintf(rec, sizeof rec, "\"kind\":\"forbidden_syscall\",\"nr\":%d", info->si_syscall);
    send_frame(rec, NULL, 0);
    _exit(3);
}

/* ---- the stack below this frame, poisoned before every call ------------------------------------ */

__attribute__((noinline)) static void poison_stack(uint8_t byte) {
    uint8_t pad[STACK_POISON];
    memset(pad, byte, sizeof pad);
    __asm__ volatile("" : : "r"(pad) : "memory");
}

/* The calibration kernel: called through the same trampoline as the candidate (extra arguments to
 * a function that ignores them are harmless in the x86-64 and AArch64 calling conventions). */
__attribute__((noinline)) static void noop_kernel(void) { __asm__ volatile("" ::: "memory"); }

static void *idle_thread(void *arg) { return arg; }

/* glibc installs its own handlers (SIGCANCEL, SIGSETXID) on a process's first pthread_create; one
 * thread started and joined here, before any filter, means no thread a kernel starts later (an
 * OpenMP team) ever needs rt_sigaction, which the filters deny. */
static void threads_initialised(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, idle_thread, NULL) == 0) pthread_join(t, NULL);
}

/* ---- the plan ---------------------------------------------------------------------------------- */

typedef struct {
    uint64_t n_calls, noop;
} Round;

/* Tell the parent where the driver is, then stop until it continues this process. The parent
 * does not believe the frame: it waits until every thread of this process is stopped. */
static void stop_at(const char *record) {
    send_frame(record, NULL, 0);
    raise(SIGSTOP);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const char *env_fd = getenv("SAGE_RESULT_FD");
    if (!env_fd) die("SAGE_RESULT_FD is not set");
    result_fd = atoi(env_fd);

    char magic[8];
    read_exact(0, magic, 8);
    if (memcmp(magic, "SAGEBIN3", 8) != 0) die("not a SAGE binary plan");
    read_exact(0, nonce, 32);
    nonce[32] = 0;
    int threads = (int)read_u64(0);
    uint64_t stop_every_call = read_u64(0);
    uint64_t pad_pages = read_u64(0);
    uint64_t lib_len = read_u64(0);
    uint64_t sym_len = read_u64(0);
    char symbol[256];
    if (sym_len >= sizeof symbol) die("symbol too long");
    read_exact(0, symbol, sym_len);
    symbol[sym_len] = 0;
    uint64_t n_args = read_u64(0);
    if (n_args > MAX_ARGS) die("too many arguments");
    Arg args[MAX_ARGS];
    uint64_t n_in = 0, n_out = 0;
    for (uint64_t i = 0; i < n_args; i++) {
        args[i].kind = read_u64(0);
        args[i].bytes = read_u64(0);
        if (args[i].kind == ARG_IN && n_out) die("inputs must precede outputs in the plan");
        n_in += args[i].kind == ARG_IN;
        n_out += args[i].kind == ARG_OUT;
    }
    if (n_in + n_out != SAGE_N_PTR) die("plan does not match the generated trampoline");
    uint64_t n_rounds = read_u64(0);
    if (pad_pages > 4096) die("layout padding too large");
    Round *rounds = calloc(n_rounds ? n_rounds : 1, sizeof(Round));
    uint64_t max_calls = 1;
    for (uint64_t r = 0; r < n_rounds; r++) {
        rounds[r].n_calls = read_u64(0);
        rounds[r].noop = read_u64(0);
        if (rounds[r].n_calls > max_calls) max_calls = rounds[r].n_calls;
    }
    if (max_calls > 4096) die("too many calls in a round");
    uint8_t *lib = malloc(lib_len ? lib_len : 1);
    read_exact(0, lib, lib_len);

    /* The library travels as bytes; a memfd keeps it off every filesystem. */
    int memfd = (int)syscall(SYS_memfd_create, "sage-kernel", 0);
    if (memfd < 0) die("memfd_create failed");
    for (uint64_t off = 0; off < lib_len;) {
        ssize_t n = write(memfd, lib + off, lib_len - off);
        if (n <= 0) die("writing the library failed");
        off += (uint64_t)n;
    }
    free(lib);
    char lib_path[64];
    snprintf(lib_path, sizeof lib_path, "/proc/self/fd/%d", memfd);

    /* Every runtime library a kernel may use is mapped now, before any candidate code. */
    dlopen("libm.so.6", RTLD_NOW | RTLD_GLOBAL);
    dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL);
    dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
    dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_GLOBAL);

    /* The call buffers: one mapping, `pad_pages` in (the parent varies the layout), per call
     * position the pointer arguments in ABI order, each [head guard | data | tail guard]. The
     * parent fills and reads them; their address goes out before any candidate code is mapped. */
    size_t region_size = pad_pages * 4096;
    for (uint64_t c = 0; c < max_calls; c++)
        for (uint64_t i = 0; i < n_args; i++)
            if (args[i].kind == ARG_IN || args[i].kind == ARG_OUT) region_size += buffer_size(args[i].bytes);
    uint8_t *region = mmap(NULL, region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) die("out of memory for buffers");
    memset(region, GUARD_BYTE, region_size); /* every page faulted in now, never inside a round */
    poison_stack(GUARD_BYTE);                 /* and the poisoned stack's pages */
    void **all_ptrs = malloc(sizeof(void *) * max_calls * (SAGE_N_PTR + 1));
    {
        uint8_t *at = region + pad_pages * 4096;
        for (uint64_t c = 0; c < max_calls; c++) {
            uint64_t k = 0;
            for (uint64_t i = 0; i < n_args; i++) {
                if (args[i].kind != ARG_IN && args[i].kind != ARG_OUT) continue;
                all_ptrs[c * (SAGE_N_PTR + 1) + k++] = at + GUARD;
                at += buffer_size(args[i].bytes);
            }
        }
    }

    if (threads > 1) threads_initialised();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);

    lock_loading(threads);
    char rec[1024];
    snprintf(rec, sizeof rec,
             "\"kind\":\"hello\",\"runtime\":\"cpu-native-driver\",\"seccomp\":\"allow-list\","
             "\"supervised\":true,\"region\":%llu,\"region_bytes\":%llu",
             (unsigned long long)(uintptr_t)region, (unsigned long long)region_size);
    send_frame(rec, NULL, 0);

    int64_t ints[SAGE_N_I64 + 1];
    float f32s[SAGE_N_F32 + 1];
    double f64s[SAGE_N_F64 + 1];
    {
        int ni = 0, nf = 0, nd = 0;
        for (uint64_t i = 0; i < n_args; i++) {
            uint64_t bits = args[i].bytes;
            if (args[i].kind == ARG_I64) memcpy(&ints[ni++], &bits, 8);
            if (args[i].kind == ARG_F32) {
                double d;
                memcpy(&d, &bits, 8);
                f32s[nf++] = (float)d;
            }
            if (args[i].kind == ARG_F64) memcpy(&f64s[nd++], &bits, 8);
        }
    }
    void *kernel = NULL;
    uint64_t *call_ns = malloc(8 * max_calls);
    FpEnv *fp_after = malloc(sizeof(FpEnv) * max_calls);
    const FpEnv expected = fpenv_read();

    for (uint64_t r = 0; r < n_rounds; r++) {
        uint8_t control = 0;
        ssize_t got = read(0, &control, 1);
        if (got != 1 || control != 'G') break;
        uint64_t seed = read_u64(0); /* the parent's: the perturbations below, nothing judged */
        Round *rd = &rounds[r];
        if (!rd->noop && kernel == NULL) {
            void *handle = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
            if (!handle) {
                const char *err = dlerror();
                char safe[600];
                size_t j = 0;
                for (const char *s = err ? err : "unknown"; *s && j < sizeof safe - 2; s++)
                    safe[j++] = (*s == '"' || *s == '\\' || (unsigned char)*s < 32) ? '\'' : *s;
                safe[j] = 0;
                snprintf(rec, sizeof rec, "\"kind\":\"load_error\",\"error\":\"%s\"", safe);
                send_frame(rec, NULL, 0);
                return 0;
            }
            kernel = dlsym(handle, symbol);
            if (!kernel) {
                snprintf(rec, sizeof rec, "\"kind\":\"load_error\",\"error\":\"no symbol %s\"", symbol);
                send_frame(rec, NULL, 0);
                return 0;
            }
            close(memfd);
            dl_iterate_phdr(collect_image, NULL); /* every image is mapped now, the candidate's too */
            if (n_images == MAX_IMAGES) die("too many loaded images for the seccomp filter");
            images[n_images].lo = (uint64_t)(uintptr_t)region; /* the buffers count as an image */
            images[n_images].hi = (uint64_t)(uintptr_t)region + region_size;
            n_images++;
            lock_running(threads);
            send_frame("\"kind\":\"loaded\"", NULL, 0);
        }
        /* 1. Stopped: the parent writes every call's inputs, sentinels and guards. */
        stop_at("\"kind\":\"ready\"");
        /* 2. The calls, back to back; stopped after the last (or after each, in quarantine), when
         * the parent reads the outputs it draws and the kernel-accounted run time. The per-call
         * preparation (stack poison, errno, malloc perturbation, FP environment) is the driver's
         * own work inside the window, measured by the no-op round and subtracted. */
        for (uint64_t c = 0; c < rd->n_calls; c++) {
            void **ptrs = &all_ptrs[c * (SAGE_N_PTR + 1)];
            uint64_t rnd = splitmix64(seed + c);
            poison_stack((uint8_t)(rnd | 1));
            mallopt(M_PERTURB, (int)((rnd >> 8) & 0xFF) | 1);
            errno = (int)((rnd >> 16) & 0x7FFFFFFF);
            fpenv_write(expected, 0);
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            sage_call_kernel(rd->noop ? (void *)noop_kernel : kernel, ptrs, ints, f32s, f64s);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            fp_after[c] = fpenv_read();
            fpenv_write(expected, 0);
            call_ns[c] = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
            if (stop_every_call || c + 1 == rd->n_calls) {
                snprintf(rec, sizeof rec, "\"kind\":\"called\",\"call\":%llu", (unsigned long long)c);
                stop_at(rec);
            }
        }
        /* 3. What the driver saw: its own clock and the floating-point environment per call. */
        for (uint64_t c = 0; c < rd->n_calls; c++) {
            FpEnv after = fp_after[c];
            char fp[160] = "ok";
            if (after.a != expected.a || after.b != expected.b)
                snprintf(fp, sizeof fp, "changed: control words 0x%x/0x%x became 0x%x/0x%x", expected.a,
                         expected.b, after.a, after.b);
            snprintf(rec, sizeof rec, "\"kind\":\"done\",\"call\":%llu,\"ns\":%llu,\"fpenv\":\"%s\"",
                     (unsigned long long)c, (unsigned long long)call_ns[c], fp);
            send_frame(rec, NULL, 0);
        }
        snprintf(rec, sizeof rec, "\"kind\":\"round_end\",\"round\":%llu", (unsigned long long)r);
        send_frame(rec, NULL, 0);
    }
    send_frame("\"kind\":\"end\"", NULL, 0);
    return 0;
}
