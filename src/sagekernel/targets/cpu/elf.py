"""Read a built shared object's dynamic symbols and constructor sections in-process.

The object checks in build.py need three facts: the undefined dynamic symbols, the defined ones
(with an `nm`-style type letter) and the byte size of the load/unload hook sections
(`.init_array`, `.preinit_array`, `.ctors`, `.fini_array`, `.dtors`).
Running `nm -D` twice and `readelf -SW` once cost three process starts (~50 ms on a 2-core box);
parsing the ELF64 section headers and `.dynsym` here takes well under a millisecond.

Only little-endian ELF64 is parsed (what gcc builds on x86-64 / aarch64). Anything else, or a
file that does not parse, returns None and the caller falls back to binutils.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_ABS = 0xFFF1
SHF_WRITE = 0x1
SHF_EXECINSTR = 0x4
STB_WEAK = 2
STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_GNU_IFUNC = 1, 2, 3, 4, 10
#: Code run when the object is loaded or unloaded (destructors run outside the harness's view too).
CONSTRUCTOR_SECTIONS = (".init_array", ".preinit_array", ".ctors", ".fini_array", ".dtors")


@dataclass(frozen=True)
class DynamicSymbols:
    undefined: list[str]  # undefined (and weak undefined) dynamic symbols, versions stripped
    defined: list[tuple[str, str]]  # (nm type letter, name) of defined dynamic symbols
    constructor_bytes: int  # total size of the CONSTRUCTOR_SECTIONS (load and unload hooks)


def read(path: Path) -> DynamicSymbols | None:
    """The dynamic symbols of `path`, or None when it is not a little-endian ELF64 that parses."""
    try:
        data = path.read_bytes()
        return _parse(data)
    except (OSError, struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None


def _cstr(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode("ascii")


def _parse(data: bytes) -> DynamicSymbols | None:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # ELFCLASS64, ELFDATA2LSB
        return None
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if e_shentsize != 64 or e_shnum == 0 or e_shstrndx >= e_shnum:
        return None
    # (name offset, type, flags, offset, size, link, entsize) per section
    sections = [
        struct.unpack_from("<IIQ8xQQI4x8xQ", data, e_shoff + i * 64) for i in range(e_shnum)
    ]
    shstr_off = sections[e_shstrndx][3]
    names = [_cstr(data, shstr_off + s[0]) for s in sections]
    ctor_bytes = sum(s[4] for n, s in zip(names, sections, strict=True) if n in CONSTRUCTOR_SECTIONS)
    dynsym = next((s for s in sections if s[1] == SHT_DYNSYM), None)
    undefined: list[str] = []
    defined: list[tuple[str, str]] = []
    if dynsym is None:
        return DynamicSymbols(undefined, defined, ctor_bytes)
    _, _, _, sym_off, sym_size, link, entsize = dynsym
    if entsize != 24 or link >= e_shnum:
        return None
    str_off = sections[link][3]
    for i in range(1, sym_size // 24):  # entry 0 is the null symbol
        st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", data, sym_off + i * 24)
        name = _cstr(data, str_off + st_name)
        stype, bind = st_info & 0xF, st_info >> 4
        if not name or stype in (STT_SECTION, STT_FILE):
            continue
        if st_shndx == SHN_UNDEF:
            undefined.append(name)
            continue
        defined.append((_letter(stype, bind, st_shndx, sections), name))
    return DynamicSymbols(undefined, defined, ctor_bytes)


def _letter(stype: int, bind: int, shndx: int, sections: list[tuple[int, ...]]) -> str:
    """The type letter `nm` prints for a defined symbol (the subset build.py distinguishes)."""
    if stype == STT_GNU_IFUNC:
        return "i"
    if bind == STB_WEAK:
        return "V" if stype == STT_OBJECT else "W"
    if shndx == SHN_ABS or shndx >= len(sections):
        return "A"
    flags = sections[shndx][2]
    if flags & SHF_EXECINSTR:
        return "T"
    if flags & SHF_WRITE:
        return "B" if sections[shndx][1] == 8 else "D"  # SHT_NOBITS -> .bss
    return "R"


# ---- load-time code, ifuncs and writable memory ------------------------------------------------

PT_LOAD, PT_DYNAMIC, PT_TLS, PT_GNU_RELRO = 1, 2, 7, 0x6474E552
PF_W = 2
SHT_RELA, SHT_SYMTAB = 4, 2
#: Dynamic tags that make the loader run code of the object (DT_INIT, DT_FINI, the arrays).
DT_RUNS_CODE = {
    12: "DT_INIT", 13: "DT_FINI", 25: "DT_INIT_ARRAY", 26: "DT_FINI_ARRAY", 32: "DT_PREINIT_ARRAY",
}
DT_ARRAY_SIZES = {27: "DT_INIT_ARRAYSZ", 28: "DT_FINI_ARRAYSZ", 33: "DT_PREINIT_ARRAYSZ"}
#: R_X86_64_IRELATIVE and R_AARCH64_IRELATIVE: a resolver function runs while the object loads.
IRELATIVE = {37, 1032}


@dataclass(frozen=True)
class Layout:
    load_code: list[str]  # dynamic entries that run code at load/unload (with their sizes)
    ifuncs: list[str]  # ifunc symbols, plus "IRELATIVE relocation" entries
    writable_bytes: int  # memory writable after loading (writable PT_LOAD minus RELRO)
    tls_bytes: int  # thread-local storage (PT_TLS memsz)


def layout(path: Path) -> Layout | None:
    """What loading the object runs and what memory it can write, or None if it does not parse."""
    try:
        return _layout(path.read_bytes())
    except (OSError, struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None


def _layout(data: bytes) -> Layout | None:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (e_phoff,) = struct.unpack_from("<Q", data, 0x20)
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 0x36)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    writable = relro = tls = 0
    dyn_off = dyn_size = 0
    for i in range(e_phnum):
        p_type, p_flags, p_offset, _va, _pa, p_filesz, p_memsz, _al = struct.unpack_from(
            "<IIQQQQQQ", data, e_phoff + i * e_phentsize)
        if p_type == PT_LOAD and p_flags & PF_W:
            writable += p_memsz
        elif p_type == PT_GNU_RELRO:
            relro += p_memsz
        elif p_type == PT_TLS:
            tls += p_memsz
        elif p_type == PT_DYNAMIC:
            dyn_off, dyn_size = p_offset, p_filesz
    load_code: list[str] = []
    sizes: dict[str, int] = {}
    for off in range(dyn_off, dyn_off + dyn_size, 16):
        tag, value = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        if tag in DT_RUNS_CODE:
            load_code.append(DT_RUNS_CODE[tag])
        if tag in DT_ARRAY_SIZES:
            sizes[DT_ARRAY_SIZES[tag]] = value
    load_code = [n for n in load_code if not n.endswith("_ARRAY") or sizes.get(n + "SZ", 1) > 0]
    ifuncs: list[str] = []
    if e_shentsize == 64 and e_shnum and e_shstrndx < e_shnum:
        sections = [struct.unpack_from("<IIQ8xQQI4x8xQ", data, e_shoff + i * 64) for i in range(e_shnum)]
        for _name, stype, _flags, off, size, link, entsize in sections:
            if stype == SHT_RELA and entsize == 24:
                for r in range(off, off + size, 24):
                    (info,) = struct.unpack_from("<Q", data, r + 8)
                    if info & 0xFFFFFFFF in IRELATIVE:
                        ifuncs.append("IRELATIVE relocation")
                        break
            if stype in (SHT_SYMTAB, SHT_DYNSYM) and entsize == 24 and link < e_shnum:
                str_off = sections[link][3]
                for s in range(off + 24, off + size, 24):
                    st_name, st_info = struct.unpack_from("<IB", data, s)
                    if st_info & 0xF == STT_GNU_IFUNC:
                        ifuncs.append(_cstr(data, str_off + st_name) or "(unnamed ifunc)")
    return Layout(load_code, sorted(set(ifuncs)), max(0, writable - relro), tls)
