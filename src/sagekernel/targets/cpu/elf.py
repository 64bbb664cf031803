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
