"""Helpers of scripts/build_wheels.sh's wheel matrix: the floor's pins and the summary.

Run from the repository root with the build tools' Python:

    python scripts/wheel_matrix.py floor             # "name==lowest" per dependency
    python scripts/wheel_matrix.py summary R1 R2 ... # one table from the parts' result files

``floor`` prints, for each of pyproject.toml's ``[project] dependencies``, a pin
to the lowest version it allows (``numpy>=1.23`` gives ``numpy==1.23``), for
``pip install --constraint``; a dependency without a ``>=`` lower bound is an
error, so a new one cannot slip past the floor's test. ``summary`` reads the
``key=value`` files that build_wheels.sh writes for each Python (and for the
floor): the wheel, the stages entered (``stage=``, ``start_<stage>=`` in
seconds), pytest's JUnit XML, the part's exit status and end; it prints the
table and exits 1 when a part failed.
"""

import argparse
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

try:
    import tomllib
except ImportError:  # Python < 3.11: pytest and build_wheels.sh's tools install tomli
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
_LOWER = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][0-9A-Za-z.]*)")


def project(pyproject=ROOT / "pyproject.toml"):
    with open(pyproject, "rb") as f:
        return tomllib.load(f)["project"]


def floor_pins(meta):
    """``name==lowest`` for each dependency; ValueError for one without ``>=``."""
    pins = []
    for req in meta["dependencies"]:
        m = _LOWER.fullmatch(req.strip())
        if m is None:
            raise ValueError(
                f"dependency {req!r} is not of the form 'name>=version': give it a lower "
                "bound of that form, or teach scripts/wheel_matrix.py its floor"
            )
        pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


STAGES = ("build", "install", "test")


def read_result(path):
    """One part's result file: its ``key=value`` lines, seconds per stage
    (``build_s``...; "-" for a stage not entered) and the JUnit counts."""
    res = {}
    for line in pathlib.Path(path).read_text().splitlines():
        key, _, value = line.partition("=")
        res[key] = value
    starts = sorted((int(res[f"start_{s}"]), s) for s in STAGES if f"start_{s}" in res)
    ends = [t for t, _ in starts[1:]] + [int(res.get("end", starts[-1][0] if starts else 0))]
    res.update({f"{s}_s": "-" for s in STAGES})
    res.update({f"{s}_s": end - t for (t, s), end in zip(starts, ends)})
    counts = dict.fromkeys(("passed", "failed", "skipped", "errors"), "-")
    junit = pathlib.Path(res.get("junit", ""))
    if res.get("junit") and junit.is_file():
        root = ET.parse(junit).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        tot = {
            k: sum(int(s.get(k, 0)) for s in suites)
            for k in ("tests", "failures", "errors", "skipped")
        }
        counts = {
            "passed": tot["tests"] - tot["failures"] - tot["errors"] - tot["skipped"],
            "failed": tot["failures"],
            "skipped": tot["skipped"],
            "errors": tot["errors"],
        }
    res.update(counts)
    return res


def summary(paths, out=sys.stdout):
    """Print one row per result file and the total seconds; True when every part passed."""
    header = ["python", "wheel", "result", "passed", "failed", "skipped", "errors"]
    header += [f"{s}_s" for s in STAGES] + ["total_s"]
    rows, ok, total = [], True, 0
    for p in paths:
        r = read_result(p)
        secs = [r[f"{s}_s"] for s in STAGES]
        part = sum(x for x in secs if x != "-")
        total += part
        passed = r.get("rc") == "0"
        ok &= passed
        result = "ok" if passed else f"FAILED in {r.get('stage', '?')} (rc {r.get('rc', '?')})"
        row = [r.get("python", "-"), r.get("wheel", "-"), result]
        row += [r[c] for c in header[3:7]] + secs + [part]
        rows.append([str(x) for x in row])
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for row in [header, *rows]:
        out.write("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() + "\n")
    out.write(f"total: {total} s in {len(rows)} parts\n")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("floor", help="print the dependencies' lowest versions as == pins")
    s = sub.add_parser("summary", help="print the table of the parts' result files")
    s.add_argument("results", nargs="+", type=pathlib.Path)
    args = ap.parse_args(argv)
    if args.cmd == "floor":
        sys.stdout.write("".join(f"{p}\n" for p in floor_pins(project())))
        return 0
    return 0 if summary(args.results) else 1


if __name__ == "__main__":
    sys.exit(main())
