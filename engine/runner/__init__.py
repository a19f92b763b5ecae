"""The candidate runner: the only code that runs a candidate, inside the OS sandbox.

It imports only the standard library, torch, triton and its own modules (relatively: the sandbox
mounts this folder alone, as the package `kbrunner`), receives inputs as raw bytes and returns
outputs as raw bytes and its own timing figures. Nothing it says is a verdict: the judge
(engine.worker) checks every figure it can against what it sees itself.
"""
