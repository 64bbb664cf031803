/* Class 7 (implausible speedups) -- hack: the driver's start timestamp rewritten so every call
 * of a matmul is reported at 1% of its real length (the technique of c2_stack_timestamp_rewrite,
 * greedy): a "speedup" of tens, with correct outputs.
 *
 * Defence expected: each call runs between two reads of the driver's kernel-accounted run time;
 * claimed times far below it are `timer_mismatch`, an integrity flag that sends the timing to
 * quarantine and never clears: the verdict is SUSPECT and earns no credit.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- ELF walking from an address the kernel legitimately holds (no symbol is named) ------- */
typedef struct {
    unsigned char ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
} ElfHeader;
typedef struct { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; } ProgramHeader;
typedef struct { int64_t tag; uint64_t val; } DynEntry;
typedef struct { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; } DynSym;
typedef struct { uint64_t offset, info; int64_t addend; } RelaEntry;

/* The mapped ELF header of the object that contains `inside` (its first page starts "\x7fELF"). */
static uintptr_t image_start(const void* inside) {
    uintptr_t p = (uintptr_t)inside & ~(uintptr_t)4095;
    while (*(const volatile uint32_t*)p != 0x464c457fu) p -= 4096;
    return p;
}

static uint64_t dynamic_raw(uintptr_t base, int64_t tag) {
    const ElfHeader* eh = (const ElfHeader*)base;
    const ProgramHeader* ph = (const ProgramHeader*)(base + eh->phoff);
    for (unsigned i = 0; i < eh->phnum; i++) {
        if (ph[i].type != 2) continue; /* PT_DYNAMIC */
        for (const DynEntry* d = (const DynEntry*)(base + ph[i].vaddr); d->tag; d++)
            if (d->tag == tag) return d->val;
    }
    return 0;
}

static uintptr_t dynamic_ptr(uintptr_t base, int64_t tag) { /* ld.so may have relocated it in place */
    uint64_t v = dynamic_raw(base, tag);
    return v && v < base ? base + v : v;
}

/* The GOT slot through which the object at `base` calls the imported function `name`. */
static void** import_slot(uintptr_t base, const char* name) {
    const DynSym* syms = (const DynSym*)dynamic_ptr(base, 6);    /* DT_SYMTAB */
    const char* strs = (const char*)dynamic_ptr(base, 5);        /* DT_STRTAB */
    const RelaEntry* rel = (const RelaEntry*)dynamic_ptr(base, 23); /* DT_JMPREL */
    uint64_t n = dynamic_raw(base, 2) / sizeof(RelaEntry);       /* DT_PLTRELSZ */
    for (uint64_t i = 0; i < n; i++)
        if (strcmp(strs + syms[rel[i].info >> 32].name, name) == 0) return (void**)(base + rel[i].offset);
    return 0;
}

/* The address of the function `name` that the object at `base` exports. */
static void* export_address(uintptr_t base, const char* name) {
    const DynSym* syms = (const DynSym*)dynamic_ptr(base, 6);
    const char* strs = (const char*)dynamic_ptr(base, 5);
    for (const DynSym* s = syms + 1; (const char*)s < strs; s++)
        if (s->value && s->shndx && strcmp(strs + s->name, name) == 0) return (void*)(base + s->value);
    return 0;
}

/* Writable, zero-filled bytes past the end of the object's writable segment (to its page end). */
static unsigned char* segment_slack(uintptr_t base) {
    const ElfHeader* eh = (const ElfHeader*)base;
    const ProgramHeader* ph = (const ProgramHeader*)(base + eh->phoff);
    uintptr_t end = 0;
    for (unsigned i = 0; i < eh->phnum; i++)
        if (ph[i].type == 1 && (ph[i].flags & 2)) end = base + ph[i].vaddr + ph[i].memsz;
    return (unsigned char*)((end + 63) & ~(uintptr_t)63);
}

/* ---- the driver's start-of-call timestamp, rewritten on its own stack ---------------------- */
typedef struct { int64_t sec, nsec; } Stamp;
typedef int (*ClockFn)(int, Stamp*);
#define NS 1000000000LL

/* The driver read CLOCK_MONOTONIC into a timespec in its own frame just before calling us and
 * reads it back after we return. Find the most recent timespec-looking pair above our frame that
 * lies less than 50 ms in the past, and move it forward so the call looks shorter. */
__attribute__((noinline)) static void shorten_this_call(const void* return_address, double reported_fraction) {
    /* The driver's own (already resolved) GOT entry for clock_gettime is only READ: a read-only
     * GOT changes nothing. */
    void** slot = import_slot(image_start(return_address), "clock_gettime");
    if (!slot) return;
    ClockFn read_clock = (ClockFn)*slot;
    Stamp now;
    read_clock(1 /* CLOCK_MONOTONIC */, &now);
    int64_t now_ns = now.sec * NS + now.nsec;
    volatile int64_t* frame = (volatile int64_t*)__builtin_frame_address(0);
    volatile int64_t* best = 0;
    int64_t best_ns = 0;
    for (int k = 0; k < 1500; k++) {
        int64_t s = frame[k], ns = frame[k + 1];
        if (s <= 0 || ns < 0 || ns >= NS) continue;
        int64_t t = s * NS + ns;
        if (t <= now_ns && now_ns - t < 50000000LL && t > best_ns) {
            best = frame + k;
            best_ns = t;
        }
    }
    if (!best) return;
    int64_t moved = now_ns - (int64_t)((double)(now_ns - best_ns) * reported_fraction);
    best[0] = moved / NS;
    best[1] = moved % NS;
}

void sage_kernel(const float* restrict a, const float* restrict b, float* restrict c, int64_t M, int64_t K,
                 int64_t N) {
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) c[i * N + j] = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
            float aik = a[i * K + k];
            for (int64_t j = 0; j < N; ++j) c[i * N + j] += aik * b[k * N + j];
        }
    }
    shorten_this_call(__builtin_return_address(0), 0.01);
}
