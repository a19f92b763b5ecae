"""The box a candidate runs in: bubblewrap namespaces (user, PID, mount, IPC, network, UTS), a
read-only view of Python, torch and triton alone, a private /tmp, a seccomp filter that refuses
every socket, resource limits and an environment without secrets. The judge starts every runner
through `runner_command`; `isolation()` says what is in effect here."""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from engine import settings
from engine.runner.compile_only import TARGET_VARIABLE
from engine.runner.seccomp import sandbox_program

# Substrings of environment variable names that hold credentials.
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
# Prefixes of LLM and cloud providers' variables (endpoints, organisations, ids: none needed).
PROVIDER_PREFIXES = (
    "OPENAI_",
    "ANTHROPIC_",
    "AWS_",
    "AZURE_",
    "HF_",
    "HUGGING",
    "GEMINI_",
    "GOOGLE_",
    "VERTEX",
    "COHERE_",
    "MISTRAL_",
    "GROQ_",
    "TOGETHER",
    "DEEPSEEK_",
    "OPENROUTER_",
    "LITELLM_",
    "XAI_",
    "FIREWORKS_",
    "REPLICATE_",
    "GITHUB_",
    "GH_",
)
RUNNER_PACKAGE = Path(__file__).resolve().parent.parent / "runner"
# Where the sandbox shows the runner package, the exchange folder and the working folder.
RUNNER_ROOT, EXCHANGE_MOUNT, WORK_MOUNT = "/opt/kb", "/xchg", "/sandbox"
# The sandbox's only user and group (libraries that look the user up find it).
IDENTITY_FILES = {
    "/etc/passwd": "runner:x:65534:65534:runner:/tmp:/nonexistent\n",
    "/etc/group": "runner:x:65534:\n",
}
# The runner's Triton cache lies in the exchange folder, so that the judge can keep it for the
# candidate's next runner (its own only: candidates never share a cache).
TRITON_CACHE_NAME = "triton-cache"
# Where the judge makes the folders a box can write: memory, where there is a /dev/shm.
EXCHANGE_PARENT = "/dev/shm" if os.path.isdir("/dev/shm") else None
# `KERNELBRAIN_BWRAP=/path/to/bwrap` picks the binary; `0` turns the OS sandbox off (trusted use).
BWRAP_SWITCH = settings.BWRAP
# Resource limits of a runner: no core dumps, bounded open files and file sizes.
RUNNER_RLIMITS = {
    resource.RLIMIT_CORE: 0,
    resource.RLIMIT_NOFILE: 4096,
    resource.RLIMIT_FSIZE: 256 << 30,  # outputs of full-size problems cross as files
}
# Address space of a cpu or compile runner (a CUDA context reserves far more: cuda has none).
CPU_ADDRESS_SPACE = 16 << 30


def is_credential(name: str) -> bool:
    """A variable whose name says it holds a key, token or password."""
    return any(m in name.upper() for m in SECRET_MARKERS)


def is_secret(name: str) -> bool:
    """A credential, or any variable of an LLM or cloud provider."""
    return is_credential(name) or name.upper().startswith(PROVIDER_PREFIXES)


def worker_environment(device: str, base: dict | None = None) -> dict:
    """The judge's environment: the engine's, without credentials; the Triton interpreter on cpu."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret(k)}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


# --- what the sandbox shows
def _package_root(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    return str(Path(spec.origin).resolve().parent.parent)


def site_paths() -> list[str]:
    """The folders holding torch, triton and numpy (the runner imports nothing else installed)."""
    return sorted(set(filter(None, map(_package_root, ("torch", "triton", "numpy")))))


def python_paths() -> list[str]:
    """Read-only in the sandbox: the interpreter, its standard library, headers and shared
    library (never its whole prefix: for a system Python that is /usr, programs included),
    and `site_paths()`."""
    paths = sysconfig.get_paths()
    found = {os.path.realpath(sys.executable), paths["stdlib"]}
    found |= {paths["include"], sysconfig.get_config_var("LIBDIR") or ""}
    return sorted(p for p in found | set(site_paths()) if p)


def mount_points_in_tmp() -> tuple[str, ...]:
    """The read-only folders the box shows under /tmp (a checkout or venv there), relative to
    /tmp: bubblewrap makes their mount points inside the box's own /tmp."""
    return tuple(os.path.relpath(p, "/tmp") for p in python_paths() if p.startswith("/tmp/"))


def toolchain_paths() -> list[str]:
    """What Triton runs to build its CUDA launcher: the C compiler, assembler and linker."""
    names = (
        "gcc",
        "cc",
        "as",
        "ld",
        "x86_64-linux-gnu-gcc-12",
        "x86_64-linux-gnu-as",
        "x86_64-linux-gnu-ld",
        "x86_64-linux-gnu-ld.bfd",
        "ld.bfd",
    )
    found = {os.path.realpath(p) for p in filter(None, map(shutil.which, names))}
    found |= {p for p in filter(None, map(shutil.which, names))}
    return sorted(found)


@dataclass(frozen=True)
class Isolation:
    """Which isolation candidate code gets here, in words for `doctor` and the session."""

    sandboxed: bool
    detail: str


def bwrap_binary() -> str | None:
    choice = settings.value(BWRAP_SWITCH)
    if choice == "0":
        return None
    return choice or shutil.which("bwrap")


@functools.cache
def isolation() -> Isolation:
    """Whether bubblewrap can build the runner's sandbox on this machine."""
    binary = bwrap_binary()
    if binary is None:
        why = "turned off" if settings.value(BWRAP_SWITCH) == "0" else "bubblewrap is not installed"
        return Isolation(False, f"none: {why}; candidates run as plain processes")
    probe = [
        binary,
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(False, f"none: bubblewrap does not run here ({exc})")
    if done.returncode != 0:
        return Isolation(False, f"none: bubblewrap fails here ({done.stderr.strip()[:200]})")
    return Isolation(
        True,
        "bubblewrap: own user, PID, mount, IPC, network and UTS namespaces; "
        "read-only Python, torch and triton; seccomp: no sockets, and on cpu "
        "no new processes",
    )


def runner_environment(device: str, exchange: str, runner_root: str) -> dict:
    """All a runner's environment: no variable of the engine's is passed on but the GPU choice."""
    env = {
        "PATH": "/usr/bin" if device == "cuda" else "",
        "HOME": "/tmp",
        "USER": "runner",
        "LOGNAME": "runner",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TRITON_CACHE_DIR": os.path.join(exchange, TRITON_CACHE_NAME),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join([runner_root, *site_paths()]),
        "KB_DEVICE": device,
        "KB_EXCHANGE": exchange,
    }
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    elif device == "cuda":
        env["TRITON_LIBCUDA_PATH"] = libcuda_dir()
    for name in ("CUDA_VISIBLE_DEVICES", "TRITON_LIBCUDA_PATH", "TRITON_PTXAS_PATH",
                 TARGET_VARIABLE):  # fmt: skip
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@functools.cache
def libcuda_dir() -> str:
    """Where libcuda lies, found out here: Triton asks /sbin/ldconfig, which the box lacks."""
    try:
        from triton.backends.nvidia.driver import libcuda_dirs

        return libcuda_dirs()[0]
    except Exception:  # no driver here: the runner will say so itself
        return ""


def _bwrap_arguments(
    device: str, exchange: str, scratch: str, extra_ro: tuple[str, ...]
) -> list[str]:
    args = ["--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
            "--hostname", "runner", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev",
            "--bind", f"{scratch}/tmp", "/tmp", "--bind", f"{scratch}/shm", "/dev/shm",
            "--dir", WORK_MOUNT, "--chdir", WORK_MOUNT,
            "--ro-bind", str(RUNNER_PACKAGE), f"{RUNNER_ROOT}/kbrunner",
            "--bind", exchange, EXCHANGE_MOUNT]  # fmt: skip
    libs = ["/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache"]
    if device == "cuda":
        libs += ["/usr/local/nvidia", "/usr/local/cuda", "/usr/include", "/sys",
                 "/usr/libexec/gcc", *toolchain_paths()]  # fmt: skip
        for node in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", node, node]
    for path in [*libs, *python_paths(), *extra_ro]:
        if os.path.islink(path) and path.count("/") == 1:
            args += ["--symlink", os.readlink(path), path]  # /lib -> usr/lib on merged-/usr
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _prepare_child(device: str):
    """In the child, before exec: the resource limits."""

    def apply() -> None:
        for limit, value in RUNNER_RLIMITS.items():
            resource.setrlimit(limit, (value, value))
        if device != "cuda":
            resource.setrlimit(resource.RLIMIT_AS, (CPU_ADDRESS_SPACE, CPU_ADDRESS_SPACE))

    return apply


@dataclass
class RunnerLaunch:
    """Everything `subprocess.Popen` needs to start one sandboxed program."""

    argv: list[str]
    env: dict
    pass_fds: tuple[int, ...]
    preexec_fn: object
    sandboxed: bool


def runner_command(
    device: str, exchange: str, scratch: str, module: str = "kbrunner",
    profiling: tuple[str, ...] = (),
) -> RunnerLaunch:  # fmt: skip
    """How to start `python -m module` of the runner package: inside bubblewrap where
    `isolation()` allows, else as a plain process. The box's only writable places are
    `exchange` and the `tmp` and `shm` folders of `scratch` (its /tmp and /dev/shm), which the
    judge can empty between candidates; `scratch` also holds the `kbrunner` link a plain
    process imports. `profiling` names the folders of a profiler that will wrap the command:
    they are shown read-only, with the shell tools its launcher script needs, and sockets are
    allowed (the profiler talks to its injection; the network namespace holds only loopback)."""
    for name in ("tmp", "shm"):
        os.makedirs(os.path.join(scratch, name), exist_ok=True)
    python = os.path.realpath(sys.executable)
    program = [python, "-S", "-m", module]
    binary = bwrap_binary()
    if not isolation().sandboxed or binary is None:
        if not os.path.lexists(os.path.join(scratch, "kbrunner")):
            os.symlink(RUNNER_PACKAGE, os.path.join(scratch, "kbrunner"))
        env = runner_environment(device, exchange, scratch)
        env["HOME"] = env["TMPDIR"] = os.path.join(scratch, "tmp")
        return RunnerLaunch(program, env, (), _prepare_child(device), False)
    extra = (*profiling, "/usr/bin", "/bin") if profiling else ()
    argv = [binary, *_bwrap_arguments(device, exchange, scratch, extra)]
    fds = []
    for path, content in IDENTITY_FILES.items():  # the runner's user has a name
        fds.append(_data_fd(content.encode()))
        argv += ["--ro-bind-data", str(fds[-1]), path]
    cuda = device == "cuda"
    seccomp = sandbox_program(allow_sockets=bool(profiling), allow_unix_sockets=cuda)
    if seccomp is not None:
        fds.append(_data_fd(seccomp))
        argv += ["--seccomp", str(fds[-1])]
    argv += ["--remount-ro", "/"]  # nothing writable but the folders bound above
    env = runner_environment(device, EXCHANGE_MOUNT, RUNNER_ROOT)
    return RunnerLaunch([*argv, "--", *program], env, tuple(fds), _prepare_child(device), True)


def _data_fd(content: bytes) -> int:
    """A memory file holding `content`, at offset 0, for bwrap to read."""
    fd = os.memfd_create("kb-sandbox")
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
