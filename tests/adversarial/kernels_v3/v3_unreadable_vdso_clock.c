/* Issue 20, class "forging the clock" -- hack: make the vDSO unreadable to fake its clock.
 *
 * The kernel finds the vDSO through getauxval(AT_SYSINFO_EHDR) (resolved by walking libc's ELF)
 * and makes its first page unreadable, so that the driver's next clock_gettime faults, and a
 * handler (or a re-mapped page at the same address) would answer with a time of its choosing.
 *
 * Defence expected: with one thread no page protection may change at all; with more, never on a
 * loaded image (the vDSO is one): stage integrity, "system call the sandbox forbids". The clock
 * would prove nothing anyway: the charge is the kernel's accounting between the parent's stops.
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


typedef unsigned long (*AuxFn)(unsigned long);
typedef int (*ProtectFn)(void*, size_t, int);

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    void* (*volatile copy)(void*, const void*, size_t) = memcpy;
    uintptr_t libc = image_start((const void*)copy);
    AuxFn aux = (AuxFn)export_address(libc, "getauxval");
    ProtectFn prot = (ProtectFn)export_address(libc, "mprotect");
    unsigned long vdso = aux ? aux(33) : 0; /* AT_SYSINFO_EHDR */
    if (vdso && prot) prot((void*)vdso, 4096, 0);
}
