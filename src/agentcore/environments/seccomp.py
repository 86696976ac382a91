"""The seccomp filter every bwrap sandbox runs under (ENV-8).

Why a filter and not masks: the sandbox sees the host tree through a
read-only `/`, and a read-only mount does not stop `connect()` on a path unix
socket — a docker daemon, an ssh agent or a session bus anywhere under `/`
would be one `curl --unix-socket` away. Finding and masking every socket file
cannot be complete (they live anywhere, at any depth, and appear at any
time). Refusing the *creation* of unix sockets is complete: without
`socket(AF_UNIX, ...)` there is nothing to connect with. `socketpair()` stays
allowed (it reaches no path; Python's asyncio needs it), and the network
relay receives its one host channel as an inherited descriptor.

The program (classic BPF over `struct seccomp_data`), for the native
architecture only:

- any other architecture (32-bit syscalls on a 64-bit kernel: `int 0x80`,
  compat ARM) kills the process — its `socketcall` would bypass the check;
- x32 system calls (x86-64 numbers with bit 30 set) are refused;
- `socket(AF_UNIX, ...)` -> EACCES;
- `io_uring_setup` -> EPERM (an io_uring can create sockets without `socket()`);
- everything else is allowed.

bwrap loads it with `--seccomp FD` right before exec'ing the command (it sets
`no_new_privs` itself). Hand-assembled rather than built with libseccomp: the
program is a dozen instructions, and libseccomp is a C library with no wheel.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct

from .base import EnvironmentUnavailable

# <linux/bpf_common.h>
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K

# <linux/seccomp.h>
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# offsets in struct seccomp_data {int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];}
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # args[0] low half: the domain is an int (little-endian hosts only)

AF_UNIX = 1
_X32_SYSCALL_BIT = 0x40000000


class _Arch:
    def __init__(self, audit_arch: int, socket_nr: int, io_uring_setup_nr: int, x32: bool) -> None:
        self.audit_arch = audit_arch
        self.socket_nr = socket_nr
        self.io_uring_setup_nr = io_uring_setup_nr
        self.x32 = x32


# <linux/audit.h> AUDIT_ARCH_* and the per-architecture syscall tables.
_ARCHES = {
    "x86_64": _Arch(0xC000003E, socket_nr=41, io_uring_setup_nr=425, x32=True),
    "aarch64": _Arch(0xC00000B7, socket_nr=198, io_uring_setup_nr=425, x32=False),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)  # struct sock_filter


@functools.cache
def program(machine: str | None = None) -> bytes:
    """The compiled filter for `machine` (default: this host), as bwrap reads it from its fd."""
    machine = machine or platform.machine()
    arch = _ARCHES.get(machine)
    if arch is None:
        raise EnvironmentUnavailable(f"no seccomp filter for the {machine} architecture; unix sockets could not be refused")
    allow = _insn(_RET_K, _RET_ALLOW)
    kill = _insn(_RET_K, _RET_KILL_PROCESS)
    eacces = _insn(_RET_K, _RET_ERRNO | errno.EACCES)
    eperm = _insn(_RET_K, _RET_ERRNO | errno.EPERM)
    # Jump offsets count instructions after the current one; the tail is fixed:
    #   [-4] allow   [-3] eacces   [-2] eperm   [-1] kill
    body: list[tuple[int, int, str, str]] = []  # (code, k, true target, false target), targets by name
    body.append((_LD_W_ABS, _ARCH, "", ""))
    body.append((_JEQ_K, arch.audit_arch, "next", "kill"))
    body.append((_LD_W_ABS, _NR, "", ""))
    if arch.x32:
        body.append((_JGE_K, _X32_SYSCALL_BIT, "eperm", "next"))
    body.append((_JEQ_K, arch.io_uring_setup_nr, "eperm", "next"))
    body.append((_JEQ_K, arch.socket_nr, "next", "allow"))
    body.append((_LD_W_ABS, _ARG0_LOW, "", ""))
    body.append((_JEQ_K, AF_UNIX, "eacces", "allow"))
    tail = {"allow": 0, "eacces": 1, "eperm": 2, "kill": 3}
    out = []
    for i, (code, k, t, f) in enumerate(body):
        def offset(name: str) -> int:
            if name in ("", "next"):
                return 0
            return (len(body) - i - 1) + tail[name]

        out.append(_insn(code, k, offset(t), offset(f)))
    return b"".join([*out, allow, eacces, eperm, kill])


def filter_fd() -> int:
    """A fresh read end holding the program (bwrap reads it to EOF and closes it); close-on-exec here."""
    data = program()
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        os.write(w, data)  # a few hundred bytes: far below any pipe's capacity
    finally:
        os.close(w)
    return r
