"""A minimal ELF64 little-endian reader: function symbols and the bytes they start with.

Only what the unwinder choice needs (see unwinder.py); written for x86-64 and aarch64 binaries.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from redline.core.errors import UsageError

_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_PT_LOAD = 1
_STT_FUNC = 2
_SHN_UNDEF = 0


@dataclass(frozen=True)
class FunctionSymbol:
    name: str
    address: int
    size: int


@dataclass(frozen=True)
class _Section:
    kind: int
    offset: int
    size: int
    link: int
    entry_size: int


@dataclass(frozen=True)
class _Segment:
    vaddr: int
    offset: int
    file_size: int


class ElfImage:
    """An ELF64 file read into memory once."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._data = self.path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read binary {self.path}: {exc.strerror}") from exc
        if self._data[:4] != b"\x7fELF":
            raise UsageError(f"{self.path} is not an ELF binary")
        if self._data[4] != 2 or self._data[5] != 1:
            raise UsageError(f"{self.path}: only 64-bit little-endian ELF files are supported")
        self.machine = struct.unpack_from("<H", self._data, 18)[0]
        self._sections = self._read_sections()
        self._segments = self._read_segments()

    def _read_sections(self) -> list[_Section]:
        shoff, = struct.unpack_from("<Q", self._data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", self._data, 0x3A)
        sections = []
        for index in range(shnum):
            base = shoff + index * shentsize
            _name, kind, _flags, _addr, offset, size, link, _info, _align, entry_size = struct.unpack_from(
                "<IIQQQQIIQQ", self._data, base)
            sections.append(_Section(kind=kind, offset=offset, size=size, link=link, entry_size=entry_size))
        return sections

    def _read_segments(self) -> list[_Segment]:
        phoff, = struct.unpack_from("<Q", self._data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", self._data, 0x36)
        segments = []
        for index in range(phnum):
            base = phoff + index * phentsize
            kind, _flags, offset, vaddr, _paddr, file_size = struct.unpack_from("<IIQQQQ", self._data, base)
            if kind == _PT_LOAD:
                segments.append(_Segment(vaddr=vaddr, offset=offset, file_size=file_size))
        return segments

    def has_full_symbol_table(self) -> bool:
        """True when .symtab is present (not stripped): static functions have names too."""
        return any(s.kind == _SHT_SYMTAB for s in self._sections)

    def function_symbols(self) -> list[FunctionSymbol]:
        """Defined functions with a size, from .symtab when present, else from .dynsym."""
        tables = [s for s in self._sections if s.kind == _SHT_SYMTAB] or \
                 [s for s in self._sections if s.kind == _SHT_DYNSYM]
        found: dict[int, FunctionSymbol] = {}
        for table in tables:
            if table.entry_size == 0 or table.link >= len(self._sections):
                continue
            strings = self._sections[table.link]
            for base in range(table.offset, table.offset + table.size, table.entry_size):
                name_at, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", self._data, base)
                if info & 0xF != _STT_FUNC or shndx == _SHN_UNDEF or size == 0 or value in found:
                    continue
                name = self._string(strings.offset + name_at)
                found[value] = FunctionSymbol(name=name, address=value, size=size)
        return sorted(found.values(), key=lambda f: f.address)

    def _string(self, at: int) -> str:
        end = self._data.index(b"\0", at)
        return self._data[at:end].decode("utf-8", "replace")

    def bytes_at(self, address: int, count: int) -> bytes:
        """The bytes of the file mapped at a virtual address (empty if not mapped from the file)."""
        for seg in self._segments:
            if seg.vaddr <= address < seg.vaddr + seg.file_size:
                start = seg.offset + (address - seg.vaddr)
                available = seg.vaddr + seg.file_size - address
                return self._data[start:start + min(count, available)]
        return b""
