/* Issue 20, class "the result channel is writable" -- hack: close the window early.
 *
 * The kernel finds the driver's nonce in its writable segment and the result pipe among its
 * descriptors, writes a well-formed "called" frame for the call the parent expects next, and
 * stops its own process (raise(SIGSTOP), resolved by walking libc) as the driver would, before
 * doing any work: the parent's window would close now and the work would run after it.
 *
 * Defence expected: the parent's window is the kernel's accounting between two stops, and the
 * outputs are read at the stop it observes: here they are still sentinels. When the driver's own
 * frame then arrives where a report was due, the round ends as tampering: stage integrity,
 * "broke the protocol".
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


typedef long (*WriteFn)(int, const void*, size_t);
typedef int (*RaiseFn)(int);

static int is_hex(unsigned char c) { return (c >= 48 && c <= 57) || (c >= 97 && c <= 102); }

static const char* find_nonce(uintptr_t driver) {
    const ElfHeader* eh = (const ElfHeader*)driver;
    const ProgramHeader* ph = (const ProgramHeader*)(driver + eh->phoff);
    for (unsigned i = 0; i < eh->phnum; i++) {
        if (ph[i].type != 1 || !(ph[i].flags & 2)) continue;
        const unsigned char* p = (const unsigned char*)(driver + ph[i].vaddr);
        for (uint64_t k = 0; k + 33 <= ph[i].memsz; k++) {
            int run = 0;
            while (run < 32 && is_hex(p[k + run])) run++;
            if (run == 32 && p[k + 32] == 0 && (k == 0 || !is_hex(p[k - 1]))) return (const char*)(p + k);
        }
    }
    return 0;
}

static size_t append(char* dst, size_t at, const char* s) {
    size_t n = strlen(s);
    memcpy(dst + at, s, n);
    return at + n;
}

void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {
    uintptr_t driver = image_start(__builtin_return_address(0));
    void* (*volatile copy)(void*, const void*, size_t) = memcpy;
    uintptr_t libc = image_start((const void*)copy);
    const char* nonce = find_nonce(driver);
    WriteFn put = (WriteFn)export_address(libc, "write");
    RaiseFn stop = (RaiseFn)export_address(libc, "raise");
    if (nonce && put && stop) {
        char frame[256];
        size_t at = 8;
        at = append(frame, at, "{\"kind\":\"called\",\"call\":0,\"nonce\":\"");
        memcpy(frame + at, nonce, 32);
        at += 32;
        at = append(frame, at, "\"}\n");
        uint64_t len = at - 8;
        memcpy(frame, &len, 8);
        for (int fd = 3; fd < 16; fd++) put(fd, frame, at);
        stop(19); /* SIGSTOP: "the call is over" */
    }
    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
