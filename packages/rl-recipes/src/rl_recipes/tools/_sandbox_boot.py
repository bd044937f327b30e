"""The first code that runs inside a sandbox subprocess: apply every guard, then run the snippet (`main.py`).

Executed by path (`python -I -u _sandbox_boot.py <config json> <status fd>`), standard library only. It reports
the guards it applied as one JSON line on the status fd, then, when it forked the snippet into a PID namespace,
one more line with the snippet's exit ({"exit": code} or {"signal": number}).
Order matters: namespaces need root's capabilities, so they come before dropping to an unprivileged uid; landlock
and the rlimits come last, so nothing after them can lift them.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import traceback
from typing import Any

CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 1, 24, 28, 38
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1 << 0, 1 << 1
SECBIT_NO_CAP_AMBIENT_RAISE, SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 6, 1 << 7
SYS_CAPSET, _LINUX_CAPABILITY_VERSION_3 = 126, 0x20080522
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
# Landlock filesystem rights that write (reads and execution stay allowed everywhere).
FS_WRITE_FILE, FS_REMOVE_DIR, FS_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
FS_MAKE_ALL = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_libc = ctypes.CDLL(None, use_errno=True)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _unshare(flags: int) -> bool:
    return _libc.unshare(ctypes.c_int(flags)) == 0


def _drop_root(uid: int) -> None:
    """Leave root's powers but keep its files readable: a run-private real uid, no capabilities, no way back.

    The effective uid stays 0 so the interpreter's own files (often under a 0700 /root) stay readable; what makes the
    process harmless is that every capability is gone (bounding set emptied, `capset` to zero, SECBIT_NOROOT locked
    so exec cannot regain them). The real uid becomes `uid`, unused and different for every run, so RLIMIT_NPROC
    binds per run (the kernel exempts a real uid of root and holders of CAP_SYS_RESOURCE/CAP_SYS_ADMIN) and runs
    cannot signal each other. Writes are confined by Landlock, not by the uid.
    """
    os.setgroups([])
    os.setresuid(uid, 0, 0)
    secure = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
    if _libc.prctl(PR_SET_SECUREBITS, secure, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS) failed")
    with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as file:
        last = int(file.read())
    for cap in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} structs, all zero
    if _libc.syscall(SYS_CAPSET, ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset to no capabilities failed")


def _namespaces(cfg: dict[str, Any]) -> tuple[str | None, bool]:
    """Enter new net/pid/ipc namespaces (through a user namespace when unprivileged); drop root. (kind, dropped)."""
    flags = CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC
    kind: str | None = None
    if cfg["namespaces"] and os.geteuid() == 0 and _unshare(flags):
        kind = "netns+pidns"
    dropped = os.geteuid() == 0
    if dropped:
        _drop_root(cfg["run_uid"])
    if cfg["namespaces"] and kind is None and _unshare(flags | CLONE_NEWUSER):
        kind = "userns+netns+pidns"
    return kind, dropped


def _limits(cfg: dict[str, Any]) -> None:
    cpu = int(cfg["cpu_s"])
    for limit, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"])),
        (resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"])),
        (resource.RLIMIT_NPROC, (cfg["max_processes"], cfg["max_processes"])),
        (resource.RLIMIT_NOFILE, (cfg["max_open_files"], cfg["max_open_files"])),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(limit, value)


def _landlock(workdir: str) -> int:
    """Forbid writing outside `workdir` (and TCP bind/connect from ABI 4); return the ABI used, 0 if unsupported."""
    _libc.syscall.restype = ctypes.c_long
    abi = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs = FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_ALL
    fs |= FS_REFER if abi >= 2 else 0
    fs |= FS_TRUNCATE if abi >= 3 else 0
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0, 0)
    attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    file_rights = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    for path, rights in ((workdir, fs), ("/dev/null", file_rights)):
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = _PathBeneathAttr(rights, fd)
        ok = _libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), 0) == 0
        os.close(fd)
        if not ok:
            os.close(ruleset)
            return 0
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
        os.close(ruleset)
        return 0
    os.close(ruleset)
    return int(abi)


def _inside(workdir: str, path: object) -> bool:
    if isinstance(path, int):  # an fd the snippet already holds
        return True
    try:
        real = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return real == workdir or real.startswith(workdir + os.sep) or real == os.devnull


def _audit_guard(workdir: str, *, network: bool, files: bool, signals: bool) -> None:
    """The weaker, in-process guard where the kernel's is missing: refuse network, writes outside `workdir` and
    signals to other processes.

    A Python audit hook (PEP 578): it cannot be removed, but it sees Python-level calls only, so with `files` it also
    refuses ctypes and starting other programs, which would run without it.
    """
    net_events = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"}
    escape_events = {
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.cdata",
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.startfile",
        "pty.spawn",
    }
    path_events = {
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.symlink",
        "os.link",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "os.rename",
        "shutil.move",
        "shutil.copyfile",
    }

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if network and event in net_events:
            raise PermissionError(f"sandbox: network access is disabled ({event})")
        if signals and event in ("os.kill", "os.killpg") and args[0] not in (0, os.getpid()):
            raise PermissionError(f"sandbox: signalling other processes is disabled ({event}{args!r})")
        if not files:
            return
        if event in escape_events:
            raise PermissionError(f"sandbox: {event} is disabled")
        if event == "open" and args and args[0] is not None:
            mode, flags = args[1] or "r", args[2] or 0
            writes = any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)
            if writes and not _inside(workdir, args[0]):
                raise PermissionError(f"sandbox: writing outside the working directory is disabled ({args[0]!r})")
        elif event in path_events:
            paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
            if any(not _inside(workdir, p) for p in paths):
                raise PermissionError(f"sandbox: {event} outside the working directory is disabled ({paths!r})")

    sys.addaudithook(hook)


def _run_snippet(workdir: str, guard: dict[str, bool]) -> int:
    if any(guard.values()):
        _audit_guard(workdir, **guard)
    main = os.path.join(workdir, "main.py")
    sys.argv = [main]
    sys.path.insert(0, workdir)
    with open(main, encoding="utf-8") as file:
        source = file.read()
    try:
        code = compile(source, main, "exec")
        exec(code, {"__name__": "__main__", "__file__": main, "__builtins__": __builtins__})
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != main:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def main() -> None:
    cfg: dict[str, Any] = json.loads(sys.argv[1])
    status = os.fdopen(int(sys.argv[2]), "w", closefd=True)
    workdir = os.path.realpath(cfg["workdir"])
    kind, dropped = _namespaces(cfg)
    abi = _landlock(workdir) if cfg["landlock"] else 0
    _limits(cfg)
    guard = {"network": kind is None, "files": abi == 0, "signals": kind is None and abi < 6}
    status.write(json.dumps({"namespaces": kind, "dropped_root": dropped, "landlock_abi": abi}) + "\n")
    status.flush()
    if kind is None:
        status.close()
        os._exit(_run_snippet(workdir, guard))
    # The first child is PID 1 of the new PID namespace: when it exits, every process in there is killed. It only
    # reaps: the snippet runs in its own child, where the kernel's signals (SIGXCPU) are not ignored as they are for
    # a namespace's init.
    reaper = os.fork()
    if reaper == 0:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the worker's killpg reaches the bootstrap
        snippet = os.fork()
        if snippet == 0:
            status.close()
            os._exit(_run_snippet(workdir, guard))
        _, wait_status = os.waitpid(snippet, 0)
        ended = {"signal": os.WTERMSIG(wait_status)} if os.WIFSIGNALED(wait_status) else {}
        ended = ended or {"exit": os.waitstatus_to_exitcode(wait_status)}
        status.write(json.dumps(ended) + "\n")
        status.close()
        os._exit(0)
    status.close()
    _, wait_status = os.waitpid(reaper, 0)
    os._exit(os.waitstatus_to_exitcode(wait_status))


if __name__ == "__main__":
    main()
