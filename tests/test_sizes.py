"""scripts/check_sizes.py: the package's class and module size limits hold,
and the check reports a breach."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_sizes.py"


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def test_no_class_over_600_lines_and_no_module_over_900():
    proc = _run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check_sizes: ok" in proc.stdout


def test_a_breach_is_reported_with_its_place(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "big.py").write_text("class Big:\n" + "    x = 1\n" * 20 + "\n" * 20)
    proc = _run("--package", str(pkg), "--max-class", "10", "--max-module", "30")
    assert proc.returncode == 1
    assert "pkg/big.py:1 class Big: 21 lines > 10" in proc.stdout
    assert "module pkg/big.py: 41 lines > 30" in proc.stdout
