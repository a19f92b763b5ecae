"""The worker's box: no secrets in its environment, no network, no processes from candidates."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.backends.local import LocalBackend
from engine.problems import load_problem
from engine.worker import WorkerClient
from engine.worker.sandbox import network_namespace_available, worker_environment

CANDIDATES = Path(__file__).parent / "candidates"


def test_environment_drops_keys_and_provider_variables():
    base = {
        "HOME": "/root", "PATH": "/bin", "OPENAI_API_KEY": "x", "ANTHROPIC_BASE_URL": "x",
        "MY_SERVICE_TOKEN": "x", "AWS_REGION": "x", "HF_HOME": "x", "DB_PASSWORD": "x",
        "GEMINI_MODEL": "x", "TRITON_INTERPRET": "1",
    }  # fmt: skip
    env = worker_environment("cpu", base)
    assert {"HOME", "PATH", "PYTHONPATH", "TRITON_INTERPRET"} == set(env)
    assert env["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in worker_environment("cuda", base)


def test_a_real_worker_sees_no_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("KB_TEST_TOKEN", "t")
    probe = (
        (CANDIDATES / "softmax_valid.py")
        .read_text()
        .replace(
            "        x = x.contiguous()\n",
            "        leaked = [k for k in os.environ if k.endswith(('_KEY', '_TOKEN'))]\n"
            "        assert not leaked, leaked\n"
            "        x = x.contiguous()\n",
            1,
        )
    )
    result = LocalBackend("cpu").check(load_problem("softmax"), "import os\n" + probe)
    assert result.passed, result.message


@pytest.mark.skipif(not network_namespace_available(), reason="no user namespaces on this OS")
def test_worker_runs_in_its_own_network_namespace():
    client = WorkerClient("cpu")
    try:
        client._start()
        assert client.isolation["network"] == "namespace (loopback only)"
        assert client.isolation["audit_hook"] is True
    finally:
        client.close()


def test_audit_hook_blocks_candidate_code_only(tmp_path):
    candidate_dir = tmp_path / "candidates"
    candidate_dir.mkdir()
    (candidate_dir / "evil.py").write_text(
        textwrap.dedent("""
        import subprocess
        def spawn():
            return subprocess.run(["true"]).returncode
        def write(path):
            with open(path, "w") as f:
                f.write("x")
    """)
    )
    script = textwrap.dedent(f"""
        import socket, subprocess, sys
        sys.path.insert(0, {str(candidate_dir)!r})
        from engine.worker.sandbox import SandboxViolation, install_audit_hook
        violations = []
        install_audit_hook({str(candidate_dir)!r}, violations)
        import evil
        outcomes = []
        for attempt in (evil.spawn, lambda: evil.write({str(tmp_path / "out.txt")!r}),
                        lambda: socket.create_connection(("127.0.0.1", 9))):
            try:
                attempt()
                outcomes.append("allowed")
            except SandboxViolation:
                outcomes.append("blocked")
        outcomes.append(str(subprocess.run(["true"]).returncode))  # the engine's own code
        print(",".join(outcomes), len(violations))
    """)
    engine_side = tmp_path / "engine_side.py"
    engine_side.write_text(script)
    done = subprocess.run(
        [sys.executable, str(engine_side)], capture_output=True, text=True, timeout=60,
        env=worker_environment("cpu"),
    )  # fmt: skip
    assert done.stdout.split() == ["blocked,blocked,blocked,0", "3"], done.stderr


def test_libraries_are_not_mistaken_for_the_standard_library():
    """Triton runs ptxas on behalf of a candidate's launch: that call comes from a library in
    site-packages, which in a plain (non-venv) Python lies inside the stdlib folder."""
    import subprocess

    import triton

    from engine.worker.sandbox import _is_stdlib

    assert _is_stdlib(subprocess.__file__)
    assert not _is_stdlib(triton.__file__)
