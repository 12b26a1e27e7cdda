"""What NVRTC made of a `.cu` file, read without a GPU: entry points, parameters, instructions.

A GPU launches a kernel by name (cuModuleGetFunction looks the name up in the cubin's symbol
table) and hands it a block of parameter bytes laid out by the *caller's* idea of the signature:
CuPy packs each argument by its NumPy type. Nothing on the GPU checks that the two agree, so a
launch signature that disagrees with the source reads garbage at run time. Here the agreement is
checked on the compiled output itself, on any machine that has NVRTC:

    PTX   `.visible .entry name( .param .u64 name_param_0, ... )`: every kernel's name and the
          width and kind of each parameter (a pointer and a `long long` are both `.u64`; which
          one is an array the source parse in the tests checks, against the same table)
    cubin an ELF file; its symbol table lists the kernels (STT_FUNC) that the driver can find

and `float_instructions` lists the floating-point instructions of the PTX, so a test can hold
them to the IEEE arithmetic the bitwise twin comparison needs.
"""

from __future__ import annotations

import re
import struct
from collections import Counter

from .signatures import KERNELS, Arg, Kernel

# The PTX parameter type each Python-side argument kind is launched as: CuPy passes arrays as
# 64-bit device pointers and the loader turns scalars into np.int64 / np.float32 (cupy_loader).
PTX_PARAM = {
    Arg.I64_ARRAY: "u64",
    Arg.U64_ARRAY: "u64",
    Arg.F32_ARRAY: "u64",
    Arg.BOOL_ARRAY: "u64",
    Arg.I64: "u64",
    Arg.F32: "f32",
}

_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)")
# An instruction's opcode with its modifiers, e.g. "fma.rn.f32", at the start of a PTX line
# (after an optional predicate such as "@%p1").
_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)", re.M)


class KernelSignatureError(RuntimeError):
    """The compiled kernels disagree with the launch signatures in signatures.py."""


def ptx_entries(ptx: str) -> dict[str, tuple[str, ...]]:
    """{kernel name: PTX type of each parameter} for every `.entry` of a PTX text."""
    return {name: tuple(_PARAM.findall(params)) for name, params in _ENTRY.findall(ptx)}


def expected_params(kernel: Kernel) -> tuple[str, ...]:
    """The PTX parameter types a kernel must have to be launched with its signature."""
    return tuple(PTX_PARAM[a] for a in kernel.args)


def signature_mismatches(source: str, ptx: str, kernels: dict[str, Kernel] = KERNELS) -> list[str]:
    """Every disagreement between the PTX of `source` and the kernels the table puts in it."""
    found = ptx_entries(ptx)
    wanted = {k.name: k for k in kernels.values() if k.source == source}
    problems = [
        f"{source}: kernel {name!r} is in the signature table but not in the compiled "
        'module (misspelt, not extern "C", or not __global__)'
        for name in wanted
        if name not in found
    ]
    problems += [
        f"{source}: the compiled module has kernel {name!r}, which the signature table does not list"
        for name in found
        if name not in wanted
    ]
    for name, kernel in wanted.items():
        if name in found and found[name] != expected_params(kernel):
            problems.append(
                f"{source}: {name} takes ({', '.join(found[name])}) in PTX, but the "
                f"launchers pass ({', '.join(expected_params(kernel))}) for "
                f"({', '.join(a.value for a in kernel.args)})"
            )
    return problems


def cubin_functions(cubin: bytes) -> set[str]:
    """The function symbols (STT_FUNC) of an ELF64 cubin: what cuModuleGetFunction can find."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a little-endian ELF64 file (a cubin)")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    # section header: name, type, flags, addr, offset, size, link, info, addralign, entsize
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab_offset = sections[link][4]
        for at in range(offset, offset + size, entsize):
            st_name, st_info = struct.unpack_from("<IB", cubin, at)
            if st_info & 0xF == 2:  # STT_FUNC
                end = cubin.index(b"\0", strtab_offset + st_name)
                names.add(cubin[strtab_offset + st_name : end].decode())
    return names


def check_compiled(source: str, ptx: str, cubin: bytes | None = None, kernels: dict[str, Kernel] = KERNELS) -> None:
    """Raise KernelSignatureError unless every kernel the table puts in `source` is in the PTX with
    the parameters its launchers pass, nothing else is, and (given a cubin) the cubin exports it."""
    problems = signature_mismatches(source, ptx, kernels)
    if cubin is not None:
        exported = cubin_functions(cubin)
        problems += [
            f"{source}: the cubin exports no function {k.name!r}"
            for k in kernels.values()
            if k.source == source and k.name not in exported
        ]
    if problems:
        raise KernelSignatureError(
            "the compiled kernels disagree with scratchkit/kernels/signatures.py:\n  " + "\n  ".join(problems)
        )


def float_instructions(ptx: str) -> Counter:
    """How often each floating-point opcode (with its modifiers) occurs: {"add.rn.f32": 34, ...}.

    Loads, stores and parameter reads of floats are data movement and are left out; what remains
    is arithmetic, conversions and moves, each with the rounding and flush modifiers that decide
    whether it is IEEE-exact.
    """
    ops = Counter()
    for op in _OPCODE.findall(ptx):
        parts = op.split(".")
        if parts[0] in ("ld", "st") or not any(p in ("f16", "f32", "f64", "bf16") for p in parts):
            continue
        ops[op] += 1
    return ops
