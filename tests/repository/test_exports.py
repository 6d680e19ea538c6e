"""The production libraries export no test-only symbol (issue 32): the test hooks live in the
testing libraries (libvdevrt_testing, libtorch_vdev_testing), which only torch_vdev._testing loads.

Reads the ELF dynamic symbol tables directly (no binutils needed)."""

import struct
from pathlib import Path

import torch_vdev._C

LIB = Path(torch_vdev._C.__file__).resolve().parent / "lib"  # beside _C (its rpath)
SHT_DYNSYM = 11
# Mangled-name pieces of test-only code: the `testing` namespaces and the old worker-start hook.
TEST_ONLY = ("7testing", "fail_next")


def exported_symbols(path: Path) -> set[str]:
    """The defined, globally visible symbols of an ELF64 little-endian shared library."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not ELF64 LE"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    names: set[str] = set()
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != SHT_DYNSYM:
            continue
        strtab = sections[link][4]
        for k in range(size // entsize):
            st_name, st_info, st_other, st_shndx = struct.unpack_from(
                "<IBBH", data, offset + k * entsize
            )
            binding, visibility = st_info >> 4, st_other & 3
            if st_shndx == 0 or binding not in (1, 2) or visibility != 0:
                continue  # undefined, local, or hidden/protected
            end = data.index(b"\0", strtab + st_name)
            names.add(data[strtab + st_name : end].decode())
    return names


def test_the_reader_sees_the_testing_librarys_exports():
    exported = exported_symbols(LIB / "libvdevrt_testing.so")
    assert any("7testing" in s and "fork_lock_count" in s for s in exported)


def test_production_libraries_export_no_test_only_symbol():
    for name in ("libvdevrt.so", "libtorch_vdev.so"):
        exported = exported_symbols(LIB / name)
        assert any("vdev" in s for s in exported), name  # the reader found its real exports
        bad = sorted(s for s in exported if any(t in s for t in TEST_ONLY))
        assert not bad, f"{name} exports test-only symbols: {bad}"
