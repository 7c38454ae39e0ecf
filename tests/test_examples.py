"""Every example runs as written: the Python blocks of README.md and of the
docs site's pages (docs/**/*.md), the Python literal blocks in vecenv's
docstrings, and examples/quickstart.py.

Each example runs as a script of its own in a subprocess (from an empty
folder, so it imports the installed vecenv). An example that needs an extra
which is not installed is skipped with the extra's name. One that must not
run here starts with the marker comment ``# example: no-run (reason)``.
"""

import ast
import importlib.util
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
from helpers import SAFE_PYTHON

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "quickstart.py"
NO_RUN = re.compile(r"^\s*# example: no-run \((.+)\)", re.MULTILINE)

# A pattern in the example's text -> (module it needs, the install hint).
NEEDS = [
    (re.compile(r"ALE/|ale_py"), "ale_py", 'the atari extra: pip install ".[atari]"'),
    (re.compile(r"stable_baselines3|vecenv\.sb3"), "stable_baselines3", 'pip install ".[sb3]"'),
    (re.compile(r"^\s*(import ray|from (vecenv\.)?ray\b)", re.M), "ray", 'pip install ".[ray]"'),
    (re.compile(r"HalfCheetah|mujoco"), "mujoco", 'pip install ".[mujoco]"'),
    (re.compile(r"^\s*(import torch|from torch\b)", re.M), "torch", "pip install torch"),
    (re.compile(r"^\s*(import|from) mpe2\b", re.M), "mpe2", "pip install mpe2"),
    (re.compile(r"^\s*(import|from) torchrl\b", re.M), "torchrl", "pip install torchrl"),
    (re.compile(r"pettingzoo|MultiAgentVecEnv"), "pettingzoo", 'pip install ".[pettingzoo]"'),
]


def markdown_blocks(path):
    """(id, code) of every ```python block of one Markdown file."""
    out = []
    name = path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            out.append((f"{name}:{start}", "\n".join(lines[start:j]) + "\n"))
            i = j
        i += 1
    return out


def readme_blocks():
    """(id, code) of every ```python block of README.md."""
    return markdown_blocks(ROOT / "README.md")


def docs_blocks():
    """(id, code) of every ```python block of the docs site's pages."""
    return [b for page in sorted((ROOT / "docs").rglob("*.md")) for b in markdown_blocks(page)]


def docstring_blocks():
    """(id, code) of every literal block (``::``) in vecenv's docstrings that is Python."""
    out = []
    for path in sorted((ROOT / "vecenv").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            name = getattr(node, "name", path.stem)
            for k, block in enumerate(_literal_blocks(doc)):
                try:
                    compile(block, "<example>", "exec")
                except SyntaxError:
                    continue  # a shell command or prose: not a Python example
                out.append((f"{path.name}:{name}:{k}", block))
    return out


def _literal_blocks(doc):
    """The indented blocks that follow a line ending in ``::``."""
    lines = doc.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        body = []
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t"))):
            body.append(lines[j])
            j += 1
        if body:
            blocks.append(textwrap.dedent("\n".join(body)).strip() + "\n")
    return blocks


EXAMPLES = readme_blocks() + docs_blocks() + docstring_blocks()


def test_examples_are_found():
    ids = [i for i, _ in EXAMPLES]
    assert sum(i.startswith("README.md") for i in ids) >= 1, ids
    assert sum(i.startswith("docs/") for i in ids) >= 10, ids
    assert any(i.startswith("sb3.py") for i in ids), ids


@pytest.mark.timeout(200)
@pytest.mark.parametrize("code", [c for _, c in EXAMPLES], ids=[i for i, _ in EXAMPLES])
def test_example_runs_as_written(code, tmp_path):
    no_run = NO_RUN.search(code)
    if no_run:
        pytest.skip(f"marked no-run: {no_run.group(1)}")
    for pattern, module, hint in NEEDS:
        if pattern.search(code) and importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} ({hint})")
    script = tmp_path / "example.py"
    script.write_text(code)
    r = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=190,
    )
    assert r.returncode == 0, (
        f"{code}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    )
    # A worker that re-imported the script unguarded says so on stderr.
    assert "bootstrapping phase" not in r.stderr, r.stderr[-3000:]


@pytest.mark.timeout(180)
def test_quickstart_runs_cartpole_and_pong():
    pytest.importorskip("ale_py", reason="the atari extra (ale-py) is not installed")
    out = subprocess.run(
        [*SAFE_PYTHON, str(EXAMPLE), "--seconds", "0.3", "--num-envs", "2"],
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


def _why_table(text):
    """The rows of the first Markdown table after the "Why" heading or the
    "CleanRL's PPO rollout loop" sentence."""
    start = text.index("Env-steps/s inside CleanRL's PPO rollout loop")
    lines = text[start:].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_readme_and_the_docs_index_show_one_table():
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "index.md").read_text()
    rows = _why_table(readme)
    assert len(rows) >= 4, rows
    assert _why_table(index) == rows
