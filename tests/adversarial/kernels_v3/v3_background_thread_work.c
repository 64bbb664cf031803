/* Issue 20, class "work outside the timed window" -- hack: a thread that keeps running.
 *
 * With a thread budget of 2, threads are allowed. Every call computes its relu and starts a
 * thread (pthread_create resolved by walking libc's ELF, never imported) that keeps running for
 * about 20 ms after the call returned: between the calls' windows, while the parent reads
 * outputs, while the reference runs. A kernel could keep a cache warm or finish work that way; this
 * one only burns the time, to show where it lands.
 *
 * Defence expected: the parent accounts every nanosecond of the process between its stops and
 * charges what ran outside the windows beyond the no-op round's share: the charge covers the
 * hidden time, and the timing is flagged (work_outside_timed_window or
 * candidate_active_during_reference): a suspect verdict that earns no credit.
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


typedef int (*StartFn)(unsigned long*, const void*, void* (*)(void*), void*);
typedef int (*DetachFn)(unsigned long);
typedef int (*ClockFn)(int, void*);

typedef struct { long long sec, nsec; } Stamp;

static void* burn(void* arg) {
    ClockFn now_fn = (ClockFn)arg;
    Stamp t0, t;
    now_fn(1, &t0);
    volatile double sink = 0.0;
    do {
        for (int i = 0; i < 10000; i++) sink += i * 0.5;
        now_fn(1, &t);
    } while ((t.sec - t0.sec) * 1000000000ll + (t.nsec - t0.nsec) < 20000000ll);
    return 0;
}

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    void* (*volatile copy)(void*, const void*, size_t) = memcpy;
    uintptr_t libc = image_start((const void*)copy);
    StartFn start = (StartFn)export_address(libc, "pthread_create");
    DetachFn detach = (DetachFn)export_address(libc, "pthread_detach");
    void* now_fn = export_address(libc, "clock_gettime");
    unsigned long tid;
    if (start && detach && now_fn && start(&tid, 0, burn, now_fn) == 0) detach(tid);
}
