"""The seccomp program, decoded and run by a small classic-BPF interpreter over many inputs.

The kernel tests in test_env_bwrap.py show the filter working for the cases
that matter (a unix socket, io_uring, x32, int 0x80, ordinary sockets); this
checks every jump of the hand-assembled program against its specification
for arbitrary (architecture, system call, first argument) triples.
"""

from __future__ import annotations

import errno
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore.environments import EnvironmentUnavailable
from agentcore.environments.seccomp import program

ALLOW, KILL = 0x7FFF0000, 0x80000000
ERRNO = 0x00050000
ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
IO_URING_SETUP = 425


def run_bpf(prog: bytes, nr: int, arch: int, arg0: int) -> int:
    """Classic BPF over struct seccomp_data, only the instructions a seccomp program may use here."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack_from("<HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    for _ in range(len(insns) + 1):  # no loops in classic BPF: each step moves forward
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # jge #k
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("ran off the program")


def expected(machine: str, nr: int, arch: int, arg0: int) -> int:
    audit_arch, socket_nr = ARCHES[machine]
    if arch != audit_arch:
        return KILL
    unsigned = nr & 0xFFFFFFFF
    if machine == "x86_64" and unsigned >= 0x40000000:
        return ERRNO | errno.EPERM
    if unsigned == IO_URING_SETUP:
        return ERRNO | errno.EPERM
    if unsigned == socket_nr and arg0 & 0xFFFFFFFF == 1:
        return ERRNO | errno.EACCES
    return ALLOW


@pytest.mark.parametrize("machine", sorted(ARCHES))
@given(
    nr=st.one_of(st.integers(0, 600), st.integers(-(2**31), 2**31 - 1), st.sampled_from([41, 198, 425, 0x40000029, -1])),
    arg0=st.one_of(st.integers(0, 64), st.integers(0, 2**64 - 1), st.sampled_from([1, 2, 10, 16, 1 | (1 << 32)])),
    foreign=st.booleans(),
)
def test_program_matches_its_specification(machine: str, nr: int, arg0: int, foreign: bool) -> None:
    arch = 0x40000003 if foreign else ARCHES[machine][0]  # AUDIT_ARCH_I386 as the foreign one
    assert run_bpf(program(machine), nr, arch, arg0) == expected(machine, nr, arch, arg0)


def test_the_cases_that_matter_decide_as_documented() -> None:
    prog = program("x86_64")
    assert run_bpf(prog, 41, 0xC000003E, 1) == ERRNO | errno.EACCES  # socket(AF_UNIX)
    assert run_bpf(prog, 41, 0xC000003E, 2) == ALLOW  # socket(AF_INET)
    assert run_bpf(prog, 53, 0xC000003E, 1) == ALLOW  # socketpair(AF_UNIX)
    assert run_bpf(prog, 41, 0x40000003, 1) == KILL  # any call through the i386 entry point


def test_an_unknown_architecture_is_refused_not_guessed() -> None:
    with pytest.raises(EnvironmentUnavailable, match="riscv64"):
        program("riscv64")
