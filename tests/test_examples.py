"""The README's example runs as shipped (examples/quickstart.py)."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "quickstart.py"


@pytest.mark.timeout(180)
def test_quickstart_runs_cartpole_and_pong():
    pytest.importorskip("ale_py", reason="the atari extra (ale-py) is not installed")
    out = subprocess.run(
        [sys.executable, "-P", str(EXAMPLE), "--seconds", "0.3", "--num-envs", "2"],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert out.returncode == 0, out.stderr
    assert "obs (8, 4) float32" in out.stdout
    for env_id in ("CartPole-v1", "ALE/Pong-v5"):
        line = next(
            ln
            for ln in out.stdout.splitlines()
            if ln.startswith(f"{env_id}: ") and "env-steps/s" in ln
        )
        rate = float(line.split(": ")[1].split(" env-steps/s")[0].replace(",", ""))
        assert rate > 0
