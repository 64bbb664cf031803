/* Class 1 (timing reuses state) -- hack: a result cache keyed by the output buffer's address,
 * kept in the runtime's memory instead of the candidate's.
 *
 * The driver gives each call position of a round its own buffers and reuses them round after
 * round. The kernel remembers, per output address, a heap copy of the result it computed there
 * and serves it again the next time the same address comes back, betting that the harness reuses
 * inputs between timed calls. The table lives in the unused tail of the native driver's writable
 * page (found by walking from the kernel's return address to the driver's ELF header), so the
 * candidate's object has no writable data and no static/global in its source.
 *
 * Defence expected: every timed call gets inputs it has never seen and the outputs of calls drawn
 * after every round are checked against the parent's reference, so the stale answers fail:
 * stage correctness, "wrong result during timing".
 */
#include <stdint.h>
#include <stdlib.h>
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

/* ---- the cache, outside the candidate's object ---------------------------------------------- */
#define SLOTS 64
typedef struct { float* out; float* copy; } Entry;

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    size_t n = (size_t)(B * D);
    Entry* table = (Entry*)(segment_slack(image_start(__builtin_return_address(0))) + 1024);
    for (int s = 0; s < SLOTS; s++) {
        if (table[s].out == out && table[s].copy) {
            memcpy(out, table[s].copy, n * sizeof(float)); /* "the same call again" */
            return;
        }
    }
    for (size_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    for (int s = 0; s < SLOTS; s++) {
        if (table[s].out == 0) {
            table[s].out = out;
            table[s].copy = (float*)malloc(n * sizeof(float));
            if (table[s].copy) memcpy(table[s].copy, out, n * sizeof(float));
            return;
        }
    }
}
