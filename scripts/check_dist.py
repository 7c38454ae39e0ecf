"""Check the file lists of a built sdist and a repaired Linux wheel of vecenv.

Used by scripts/build_wheels.sh; run from the repository root:

    python scripts/check_dist.py --sdist dist/vecenv-*.tar.gz \
        --wheel wheelhouse/vecenv-*.whl --auditwheel auditwheel

The sdist must carry everything a compiler needs (setup.py, pyproject.toml,
every file of csrc/ but generated ones, the package sources), the tests and
every file they run or read (scripts/, the benchmark scripts, examples/, the
README), and nothing generated;
the wheel only the package with its compiled core, py.typed and stub, and its
dist-info with the license. ``auditwheel show`` must report a manylinux tag and
no external shared library. Exits 1 and lists every problem found.
"""

import argparse
import pathlib
import re
import subprocess
import sys
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Generated or build-only files that must never ship.
FORBIDDEN = re.compile(r"(\.(c|cpp|o|so|html|pyc)$|(^|/)(__pycache__|build)/)")


# What the tests run or read besides the package (tests/test_scripts.py,
# test_sizes.py, test_benchmarks.py, test_multi_agent.py, test_examples.py...):
# (folder, glob) pairs, searched recursively. A test whose file the sdist
# lacks fails only for whoever runs the tests of the unpacked sdist.
TEST_SUPPORT = (
    ("tests", "*.py"),
    ("scripts", "*.sh"),
    ("scripts", "*.py"),
    ("benchmarks", "*.py"),
    ("benchmarks", "README.md"),
    ("examples", "*.py"),
)


def _source_files(root=ROOT):
    """Files of the source tree ``root`` the sdist must hold (relative paths)."""
    # Every file of csrc/ but what a build generates: an include (.pxi) that
    # the sdist lacks fails only when a user's pip compiles it.
    csrc = [
        p
        for p in (root / "csrc").iterdir()
        if p.is_file() and not FORBIDDEN.search(p.name) and not p.name.startswith(".")
    ]
    pkg = [p for pat in ("*.py", "*.pyi", "py.typed") for p in (root / "vecenv").glob(pat)]
    top = [root / n for n in ("setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md")]
    support = [
        p
        for folder, pat in TEST_SUPPORT
        for p in (root / folder).rglob(pat)
        if p.is_file() and not FORBIDDEN.search(str(p.relative_to(root)))
    ]
    return sorted({str(p.relative_to(root)) for p in csrc + pkg + top + support})


def check_sdist(path, root=ROOT):
    """Problems of the sdist at ``path`` against the source tree ``root``."""
    with tarfile.open(path) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
    prefix = names[0].split("/", 1)[0] + "/"
    inside = {n[len(prefix) :] for n in names if n.startswith(prefix)}
    problems = [f"sdist lacks {n}" for n in _source_files(root) if n not in inside]
    problems += [f"sdist holds a build product: {n}" for n in sorted(inside) if FORBIDDEN.search(n)]
    return problems


def check_wheel(path):
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
    problems = []
    dist_info = [n for n in names if re.match(r"vecenv-[^/]+\.dist-info/", n)]
    pkg = [n for n in names if n.startswith("vecenv/")]
    problems += [
        f"wheel file outside vecenv/ and its dist-info: {n}"
        for n in names
        if n not in dist_info + pkg
    ]
    cores = [n for n in pkg if re.fullmatch(r"vecenv/_core\.[^/]*(so|pyd)", n)]
    if len(cores) != 1:
        problems.append(f"wheel must hold one compiled vecenv/_core module, found {cores}")
    for need in ("vecenv/py.typed", "vecenv/_core.pyi"):
        if need not in pkg:
            problems.append(f"wheel lacks {need}")
    for src in sorted((ROOT / "vecenv").glob("*.py")):
        if f"vecenv/{src.name}" not in pkg:
            problems.append(f"wheel lacks vecenv/{src.name}")
    leftovers = [
        n
        for n in pkg
        if n not in cores and (FORBIDDEN.search(n) or n.endswith((".pyx", ".pxd", ".pxi", ".h")))
    ]
    problems += [f"wheel holds a build leftover or source: {n}" for n in leftovers]
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in dist_info):
        problems.append("wheel lacks dist-info/licenses/LICENSE")
    if not re.search(r"-manylinux_?\d", pathlib.Path(path).name):
        problems.append(f"wheel name has no manylinux tag: {pathlib.Path(path).name}")
    return problems


def check_auditwheel(auditwheel, path):
    res = subprocess.run([auditwheel, "show", str(path)], capture_output=True, text=True)
    text = " ".join(res.stdout.split())
    problems = []
    if res.returncode != 0:
        problems.append(f"auditwheel show failed ({res.returncode}): {res.stderr.strip()}")
    if not re.search(r'consistent with the following platform tag: "manylinux_\d+_\d+_\w+"', text):
        problems.append(f"auditwheel show reports no manylinux tag: {text}")
    if "external shared libraries are required" in text:
        problems.append(f"the wheel needs external shared libraries: {text}")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", required=True, type=pathlib.Path)
    ap.add_argument("--wheel", required=True, type=pathlib.Path)
    ap.add_argument("--auditwheel", default="auditwheel", help="auditwheel executable")
    args = ap.parse_args(argv)
    problems = check_sdist(args.sdist) + check_wheel(args.wheel)
    problems += check_auditwheel(args.auditwheel, args.wheel)
    for p in problems:
        sys.stderr.write(f"check_dist: {p}\n")
    if problems:
        return 1
    sys.stdout.write(
        f"check_dist: {args.sdist.name} and {args.wheel.name} are complete and clean\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
