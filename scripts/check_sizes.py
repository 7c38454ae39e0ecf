"""Check that the package stays readable in one sitting: no class in
vecenv/ over MAX_CLASS lines, no module over MAX_MODULE lines (issue 12).

Run from anywhere: ``python scripts/check_sizes.py`` (``.ci/run`` does);
prints every offender and exits 1 if there is one, else prints the largest
module and class and exits 0. ``--max-class`` / ``--max-module`` override
the limits (a test checks that a tight limit is reported).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[1]
MAX_CLASS = 600  # lines, docstring included
MAX_MODULE = 900  # lines


def measure(package: Path) -> Tuple[List[Tuple[str, int]], List[Tuple[str, int]]]:
    """``(modules, classes)``: ``(name, lines)`` of every ``.py``/``.pyi``
    module under ``package`` and of every class in them (nested ones too)."""
    modules, classes = [], []
    for path in sorted(package.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        text = path.read_text()
        rel = path.relative_to(package.parent).as_posix()
        modules.append((rel, len(text.splitlines())))
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                classes.append((f"{rel}:{node.lineno} class {node.name}", lines))
    return modules, classes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", type=Path, default=ROOT / "vecenv")
    ap.add_argument("--max-class", type=int, default=MAX_CLASS)
    ap.add_argument("--max-module", type=int, default=MAX_MODULE)
    args = ap.parse_args(argv)
    modules, classes = measure(args.package)
    if not modules:
        print(f"check_sizes: no modules under {args.package}", file=sys.stderr)
        return 1
    bad = [f"module {n}: {k} lines > {args.max_module}" for n, k in modules if k > args.max_module]
    bad += [f"{n}: {k} lines > {args.max_class}" for n, k in classes if k > args.max_class]
    for line in bad:
        print(f"check_sizes: {line}: split it by job (see docs/internals.md, 'How it is built')")
    if bad:
        return 1
    big_module = max(modules, key=lambda m: m[1])
    big_class = max(classes, key=lambda c: c[1]) if classes else ("-", 0)
    print(
        f"check_sizes: ok (largest module {big_module[0]} {big_module[1]} lines <= "
        f"{args.max_module}; largest class {big_class[0]} {big_class[1]} lines <= {args.max_class})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
