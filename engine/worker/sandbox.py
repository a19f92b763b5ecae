"""What keeps a candidate in its box: a worker environment without secrets, a network namespace
where the OS allows one, and an audit hook that blocks processes, sockets and native code."""

from __future__ import annotations

import functools
import os
import site
import subprocess
import sys
import sysconfig

# Substrings of environment variable names that hold credentials.
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
# Prefixes of LLM and cloud providers' variables (endpoints, organisations, ids: none needed).
PROVIDER_PREFIXES = (
    "OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "HF_", "HUGGING", "GEMINI_", "GOOGLE_",
    "VERTEX", "COHERE_", "MISTRAL_", "GROQ_", "TOGETHER", "DEEPSEEK_", "OPENROUTER_",
    "LITELLM_", "XAI_", "FIREWORKS_", "REPLICATE_", "GITHUB_", "GH_",
)  # fmt: skip
# Audit events blocked always, once the sandbox is armed: a candidate never needs the network.
NETWORK_EVENTS = frozenset(
    "socket.connect socket.bind socket.getaddrinfo socket.gethostbyname socket.gethostbyaddr "
    "socket.sendto socket.sendmsg".split()
)
# Audit events blocked when the candidate itself (not Triton or PyTorch) is the caller.
CANDIDATE_EVENTS = frozenset(
    "subprocess.Popen os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty os.kill "
    "os.killpg ctypes.dlopen ctypes.dlsym ctypes.cdata ctypes.addressof pty.spawn".split()
)
STDLIB_DIRS = tuple(
    {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"], "<frozen "}
)
# In a plain (non-venv) Python, site-packages lies inside the stdlib folder: Triton and PyTorch
# there are libraries, not the standard library.
SITE_DIRS = tuple(
    {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
)


def _is_stdlib(filename: str) -> bool:
    return filename.startswith(STDLIB_DIRS) and not filename.startswith(SITE_DIRS)


class SandboxViolation(PermissionError):
    """A blocked call; the worker reports it as forbidden_import."""


def is_credential(name: str) -> bool:
    """A variable whose name says it holds a key, token or password."""
    return any(m in name.upper() for m in SECRET_MARKERS)


def is_secret(name: str) -> bool:
    """A credential, or any variable of an LLM or cloud provider."""
    return is_credential(name) or name.upper().startswith(PROVIDER_PREFIXES)


def worker_environment(device: str, base: dict | None = None) -> dict:
    """A copy of the environment without credentials; the Triton interpreter on cpu."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret(k)}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


NETNS_PREFIX = ("unshare", "--net", "--map-root-user")


@functools.cache
def network_namespace_available() -> bool:
    """Whether `unshare --net --map-root-user` works here (user namespaces may be disabled)."""
    try:
        done = subprocess.run([*NETNS_PREFIX, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# Set to 0 to keep workers in the engine's network namespace (if namespaces break a GPU driver).
NETNS_SWITCH = "KERNELBRAIN_WORKER_NETNS"


def worker_command(isolate_network: bool, module: str = "engine.worker") -> list[str]:
    """`python -m module`, in a fresh network namespace when wanted and the OS allows it."""
    command = [sys.executable, "-m", module]
    wanted = isolate_network and os.environ.get(NETNS_SWITCH, "1") != "0"
    if wanted and network_namespace_available():
        return [*NETNS_PREFIX, *command]
    return command


def network_interfaces() -> list[str]:
    import socket

    return sorted(name for _, name in socket.if_nameindex())


def _caller_is_candidate(candidate_dir: str) -> bool:
    """Whether the innermost frame outside the standard library is candidate code (its
    directory, or code compiled from a string)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename != __file__ and not _is_stdlib(filename):
            return filename.startswith(candidate_dir) or filename.startswith("<")
        frame = frame.f_back
    return False


def _writes(args) -> bool:
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool(flags and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))


def install_audit_hook(candidate_dir: str, violations: list[str]) -> None:
    """Block the network always, and processes, native code and file writes from candidate
    code; Triton and PyTorch may still spawn ptxas and write their caches."""

    def hook(event: str, args) -> None:
        if event in NETWORK_EVENTS:
            blocked = event
        elif event in CANDIDATE_EVENTS or (event == "open" and _writes(args)):
            if not _caller_is_candidate(candidate_dir):
                return
            blocked = event if event != "open" else f"open({args[0]!r}) for writing"
        else:
            return
        violations.append(blocked)
        raise SandboxViolation(f"the worker's sandbox blocked {blocked}")

    sys.addaudithook(hook)
