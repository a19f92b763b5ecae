"""Seccomp filters as classic BPF programs, and their installation (standard library only: the
runner imports this inside the sandbox).

Two filters stack. The sandbox's, which bwrap installs for every process in the box, refuses
sockets (on cuda all but AF_UNIX, which the driver needs), io_uring (it can open sockets), x32
calls and foreign architectures. A candidate's, which each forked runner installs on itself
before any candidate code exists, keeps it from reaching past its own process: no signal to
another process, no ptrace or foreign memory access, no new session (its whole process group
dies with it), no System V IPC (which outlives a process), and on cpu, where Triton runs no
compiler, no new process at all (clone only for threads; clone3 says ENOSYS, so glibc falls
back to clone).
"""

from __future__ import annotations

import ctypes
import os
import struct

_ARCH = {  # machine: (AUDIT_ARCH, {name: number})
    "x86_64": (
        0xC000003E,
        {
            "socket": 41, "socketpair": 53, "io_uring_setup": 425,
            "clone": 56, "fork": 57, "vfork": 58, "clone3": 435,
            "kill": 62, "tkill": 200, "tgkill": 234,
            "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
            "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
            "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
            "setsid": 112, "setpgid": 109,
            "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198, "socketpair": 199, "io_uring_setup": 425,
            "clone": 220, "clone3": 435,
            "kill": 129, "tkill": 130, "tgkill": 131,
            "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
            "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
            "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
            "setsid": 157, "setpgid": 154,
            "shmget": 194, "semget": 190, "msgget": 186, "mq_open": 180,
        },
    ),
}  # fmt: skip
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EACCES, _EPERM, _ENOSYS = 13, 1, 38
_X32_BIT, _CLONE_THREAD, _AF_UNIX = 0x40000000, 0x00010000, 1
_SECCOMP_NR, _SECCOMP_ARCH, _SECCOMP_ARG0 = 0, 4, 16  # offsets in struct seccomp_data
# Calls a candidate never needs, refused outright.
_CANDIDATE_REFUSED = (
    "tkill", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open",
    "pidfd_send_signal", "pidfd_getfd", "setsid", "setpgid", "shmget", "semget", "msgget",
    "mq_open",
)  # fmt: skip
# Calls that send a signal to the process named by their first argument: only to itself.
_SIGNALS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _known() -> tuple[int, dict] | None:
    return _ARCH.get(os.uname().machine)


def _prologue(audit_arch: int, deny: int) -> list[bytes]:
    """Refuse a foreign architecture and x32 calls; leave the call's number loaded."""
    arch = [_insn(_LD_ABS, _SECCOMP_ARCH), _insn(_JEQ, audit_arch, 1, 0), _insn(_RET, deny)]
    return arch + [_insn(_LD_ABS, _SECCOMP_NR), _insn(_JGE, _X32_BIT, 0, 1), _insn(_RET, deny)]


def _refuse(number: int, action: int) -> list[bytes]:
    return [_insn(_JEQ, number, 0, 1), _insn(_RET, action)]


def _unless_arg0(number: int, value: int, deny: int, mask: bool = False) -> list[bytes]:
    """Call `number` is allowed only when its first argument equals `value` (or, with `mask`,
    has the bits of `value`); the call's number is reloaded afterwards."""
    test = _JSET if mask else _JEQ
    return [_insn(_JEQ, number, 0, 5), _insn(_LD_ABS, _SECCOMP_ARG0), _insn(test, value, 0, 1),
            _insn(_RET, _ALLOW), _insn(_RET, deny), _insn(_LD_ABS, _SECCOMP_NR)]  # fmt: skip


def _no_processes(numbers: dict, deny: int) -> list[bytes]:
    program = []
    for name, action in (("fork", deny), ("vfork", deny), ("clone3", _ERRNO | _ENOSYS)):
        if name in numbers:
            program += _refuse(numbers[name], action)
    return program + _unless_arg0(numbers["clone"], _CLONE_THREAD, deny, mask=True)


def sandbox_program(allow_sockets: bool = False, allow_unix_sockets: bool = False) -> bytes | None:
    """The sandbox's filter for bwrap's --seccomp; None on a machine this does not know."""
    known = _known()
    if known is None:
        return None
    audit_arch, numbers = known
    deny = _ERRNO | _EACCES
    program = _prologue(audit_arch, deny) + _refuse(numbers["io_uring_setup"], deny)
    if not allow_sockets:
        for name in ("socket", "socketpair"):
            if allow_unix_sockets:  # the family is the first argument
                program += _unless_arg0(numbers[name], _AF_UNIX, deny)
            else:
                program += _refuse(numbers[name], deny)
    return b"".join(program + [_insn(_RET, _ALLOW)])


def candidate_program(own_pid: int, allow_processes: bool) -> bytes | None:
    """The filter a runner installs on itself before it loads its candidate."""
    known = _known()
    if known is None:
        return None
    audit_arch, numbers = known
    deny = _ERRNO | _EPERM
    program = _prologue(audit_arch, deny)
    for name in _CANDIDATE_REFUSED:
        program += _refuse(numbers[name], deny)
    for name in _SIGNALS:
        program += _unless_arg0(numbers[name], own_pid, deny)
    if not allow_processes:
        program += _no_processes(numbers, deny)
    return b"".join(program + [_insn(_RET, _ALLOW)])


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def install(program: bytes) -> None:
    """Install `program` on this process (and every thread and child it starts from now on)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    for option, argument in (
        (_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1)),
        (_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER)),
    ):
        extra = ctypes.byref(fprog) if option == _PR_SET_SECCOMP else ctypes.c_ulong(0)
        if libc.prctl(option, argument, extra, ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            raise OSError(ctypes.get_errno(), "prctl: the seccomp filter could not be installed")
