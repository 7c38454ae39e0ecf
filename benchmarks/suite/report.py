"""The report of a run: the tables, the Markdown summary, the conclusion for this machine (parent).

Reads the report dict (the JSON, see :mod:`suite.results`) and prints it
through a :class:`~suite.console.Console`; :func:`write` saves the JSON and
the ``.md`` next to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from vecenv.bench import fmt_rate  # the installed vecenv (benchmarks/ heads sys.path)

from .console import Console
from .contenders import is_vecenv
from .results import cell, cell_entries, find, rate
from .targets import AUTO, fmt_target_value

AS_FAST = 0.95  # "as fast or faster": within 5% of the other's median


def fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


def layout_text(e: Dict[str, Any]) -> str:
    """How to build this vecenv contender: a line of Python a user can copy
    (``env_fns`` their list of env factories), the chosen layout after it."""
    lay = e.get("layout") or {}
    name = e["contender"]
    if name == "vecenv_async":
        return f"vecenv.ShmemVecEnv(env_fns, batch_size={lay.get('batch_size')}) with send/recv"
    if name == "vecenv_gym":
        return "vecenv.AsyncVectorEnv(env_fns)"
    if name == "vecenv_sb3":
        return "vecenv.sb3.SubprocVecEnv(env_fns)"
    if name == "vecenv_ray":
        return "vecenv.ray.RayVecEnv(env_fns)"
    w, per = lay.get("num_workers"), lay.get("envs_per_worker")
    if w is None:
        return "vecenv.ShmemVecEnv(env_fns)"
    inline = bool(lay.get("inline"))
    if w == 0:
        where = "in process"
    elif inline:
        where = f"the caller and {w} worker{'s' if w != 1 else ''}, {per} env{'s' if per != 1 else ''} each"
    else:
        where = f"{w} worker{'s' if w != 1 else ''} x {per} env{'s' if per != 1 else ''}"
    if name == "vecenv":  # the default layout: nothing to pass
        return f"vecenv.ShmemVecEnv(env_fns)  # default: {where}"
    args = f"num_workers={w}" + (", inline=True" if inline else "")
    return f"vecenv.ShmemVecEnv(env_fns, {args})  # {where}"


def conclude(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per env and num_envs: the fastest contender, vecenv's fastest way, and
    gymnasium's in-process SyncVectorEnv against it."""
    out = []
    for env in report["envs"]:
        for n in sorted({c["num_envs"] for c in report["cells"] if c["env"] == env}):
            entries = cell_entries(report, env, n)
            if not entries:
                continue
            best = max(entries, key=rate)
            ours = [e for e in entries if is_vecenv(e["contender"])]
            peers = [e for e in entries if not is_vecenv(e["contender"])]
            v = max(ours, key=rate) if ours else None
            peer = max(peers, key=rate) if peers else None
            sync = next((e for e in entries if e["contender"] == "gym_sync"), None)
            out.append(
                {
                    "env": env,
                    "num_envs": n,
                    "fastest": best["contender"],
                    "fastest_env_steps_per_s": rate(best),
                    "vecenv_best": v and v["contender"],
                    "vecenv_layout": v and layout_text(v),
                    "vecenv_env_steps_per_s": v and rate(v),
                    "best_peer": peer and peer["contender"],
                    "best_peer_env_steps_per_s": peer and rate(peer),
                    "gym_sync_vs_vecenv": rate(sync) / rate(v) if sync and v else None,
                }
            )
    return out


def cell_summary(report, env, n) -> str:
    """One line on a finished cell: the fastest and vecenv's fastest."""
    entries = cell_entries(report, env, n)
    if not entries:
        return "nothing measured"
    best = max(entries, key=rate)
    text = f"fastest {best['contender']} {fmt_rate(rate(best))}"
    ours = [e for e in entries if is_vecenv(e["contender"])]
    if ours and not is_vecenv(best["contender"]):
        v = max(ours, key=rate)
        text += f", vecenv's best {v['contender']} {fmt_rate(rate(v))}"
    return text


def _sizes(ns: List[int]) -> str:
    return ", ".join(str(n) for n in ns)


def print_conclusion(report: Dict[str, Any], console: Console) -> None:
    rows = report.get("conclusion") or []
    if not rows:
        return
    cores = report["machine"]["usable_cores"]
    table = []
    for r in rows:
        v = r["vecenv_env_steps_per_s"]
        ratio = r["gym_sync_vs_vecenv"]
        table.append(
            [
                f"{r['env']} x{r['num_envs']}",
                f"{r['fastest']} {fmt_rate(r['fastest_env_steps_per_s'])}",
                "-" if v is None else f"{r['vecenv_best']} {fmt_rate(v)}",
                "-"
                if ratio is None
                else f"{ratio:.2f}x" + (" (as fast)" if ratio >= AS_FAST else ""),
            ]
        )
    console.table(
        f"What to use here ({cores} usable cores): env-steps/s, medians",
        ["env, num_envs", "fastest", "vecenv's fastest (code below)", "gym Sync / that"],
        table,
    )
    console.print("[bold]Conclusion for this machine[/bold]")
    for env in report["envs"]:
        mine = [r for r in rows if r["env"] == env]
        if not mine:
            continue
        fastest: Dict[str, List[int]] = {}
        layouts: Dict[str, List[int]] = {}
        for r in mine:
            fastest.setdefault(r["fastest"], []).append(r["num_envs"])
            if r["vecenv_layout"]:
                layouts.setdefault(r["vecenv_layout"], []).append(r["num_envs"])
        parts = [
            "Fastest: " + "; ".join(f"{c} at num_envs {_sizes(ns)}" for c, ns in fastest.items())
        ]
        if layouts:
            parts.append(
                "With vecenv: "
                + "; ".join(f"`{lay}` at num_envs {_sizes(ns)}" for lay, ns in layouts.items())
            )
        ratios = {r["num_envs"]: r["gym_sync_vs_vecenv"] for r in mine}
        faster = [n for n, x in ratios.items() if x is not None and x >= 2 - AS_FAST]
        level = [n for n, x in ratios.items() if x is not None and AS_FAST <= x < 2 - AS_FAST]
        if faster:
            parts.append(
                f"gymnasium's in-process SyncVectorEnv is faster at num_envs {_sizes(faster)}: "
                "a step of this env is too cheap there for worker processes to pay off"
            )
        if level:
            parts.append(
                f"gymnasium's in-process SyncVectorEnv is as fast (within 5%) at num_envs "
                f"{_sizes(level)}"
            )
        slower = [n for n, x in ratios.items() if x is not None and x < AS_FAST]
        if slower:
            parts.append(
                f"gymnasium's in-process SyncVectorEnv is slower at num_envs {_sizes(slower)}"
            )
        console.print(f"  {env}: " + ". ".join(parts) + ".")


def markdown_summary(report: Dict[str, Any]) -> str:
    """The run in Markdown: env-steps/s per env (contenders x num_envs,
    medians), vecenv_auto's choices, and the targets as pass/short."""
    m = report["machine"]
    lines = [
        f"# vecenv benchmark, {report.get('created_utc', '?')}",
        "",
        f"{m.get('cpu_model', '?')}, {m.get('usable_cores', '?')} usable cores; vecenv "
        f"{report.get('versions', {}).get('vecenv', '?')} at "
        f"{(report.get('git', {}).get('commit') or '?')[:8]}. env-steps/s, medians.",
    ]
    ns = sorted({c["num_envs"] for c in report["cells"]})
    for env in report["envs"]:
        mine = [n for n in ns if cell(report, env, n)]
        names = [
            name
            for name in report["contenders"]
            if any(e["env"] == env and e["contender"] == name for e in report["results"])
        ]
        if not mine or not names:
            continue
        lines += ["", f"## {env}", ""]
        lines.append("| contender | " + " | ".join(f"x{n}" for n in mine) + " |")
        lines.append("|---" * (len(mine) + 1) + "|")
        for name in names:
            row = []
            for n in mine:
                e = find(report, env, n, name)
                row.append(fmt_rate(rate(e)) if e else "-")
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        ideal = []
        for n in mine:
            c = cell(report, env, n)
            ideal.append(
                fmt_rate(c["ideal_env_steps_per_s"])
                if c and c.get("ideal_env_steps_per_s")
                else "-"
            )
        lines.append("| ideal | " + " | ".join(ideal) + " |")
    autos = [e for e in report["results"] if e["contender"] == AUTO]
    if autos:
        lines += ["", '## num_workers="auto": its choices', ""]
        lines += ["| env, num_envs | workers x envs | env.step (us) | why |", "|---|---|---|---|"]
        for e in autos:
            lay = e.get("layout") or {}
            step = lay.get("step_us")
            lines.append(
                f"| {e['env']} x{e['num_envs']} | {lay.get('num_workers')} x "
                f"{lay.get('envs_per_worker')} | {'-' if step is None else f'{step:.1f}'} | "
                f"{lay.get('why', '')} |"
            )
    calm = report.get("quiet") or {}
    if calm.get("quiet"):
        lines += [
            "",
            f"A quiet run: every raw env within ±{calm['threshold_pct']:g}% over its rounds.",
        ]
    elif calm.get("quiet") is False:
        lines += ["", f"Note: {calm['note']}."]
    return "\n".join(lines) + "\n"


def print_report(report: Dict[str, Any], console: Console, targets: bool = False) -> None:
    """The tables, skips and notes, then what to conclude (last); the
    project's own targets (the JSON's ``targets``) only with ``targets``."""
    ns = sorted({c["num_envs"] for c in report["cells"]})
    for env in report["envs"]:
        cells = {c["num_envs"]: c for c in report["cells"] if c["env"] == env}
        if not cells:
            continue
        names = [
            n
            for n in report["contenders"]
            if any(e["env"] == env and e["contender"] == n for e in report["results"])
        ]
        rows = []
        for name in names:
            row = [name]
            for n in ns:
                e = find(report, env, n, name)
                if e is None:
                    row.append("-")
                    continue
                # One short line a cell, so that the table fits 80 columns; the
                # spreads and ratios are in the .md and the JSON.
                row.append(fmt_rate(e["env_steps_per_s"]["median"]))
            rows.append(row)
        raw_row, ideal_row = ["one raw env"], ["ideal"]
        for n in ns:
            c = cells.get(n)
            raw = c and c["raw_env_steps_per_s"]
            raw_row.append(fmt_rate(raw["median"]) if raw else "-")
            ideal_row.append(fmt_rate(c["ideal_env_steps_per_s"]) if c else "-")
        rows += [raw_row, ideal_row]
        console.table(
            f"{env}: env-steps/s, medians (spreads, ratios: the .md)",
            ["contender"] + [f"x{n}" for n in ns],
            rows,
        )
    lat_rows = []
    for e in report["results"]:
        if e["env"] != "noop" or e["latency_us_per_call"] is None:
            continue
        lat = e["latency_us_per_call"]
        lat_rows.append(
            [
                f"{e['contender']} x{e['num_envs']}",
                f"{lat['p50']:.1f}",
                f"{lat['p90']:.1f}",
                str(e["layout"].get("num_workers", "-")),
            ]
        )
    if lat_rows:
        # The C wait/wake floor (benchmarks/wakeup_floor.c) is not in this
        # table: it times the futex round trip alone, without the Python that
        # every contender runs per batch, so it is no floor of theirs. It is in
        # the JSON ("floor") and behind --targets.
        console.table(
            "noop: latency per batch step (us; async contenders: per recv+send)",
            ["contender", "p50", "p90", "workers"],
            lat_rows,
        )
    if report.get("targets") and targets:
        rows = []
        for t in report["targets"]:
            color = {"pass": "green", "short": "red"}.get(t["status"], "yellow")
            rows.append(
                [
                    t["target"],
                    fmt_target_value(t),
                    f"[{color}]{t['status']}[/{color}]",
                    t.get("who", ""),
                ]
            )
        console.table(
            "the project's targets (--targets; ratios measured in this run)",
            ["target", "value", "status", "from"],
            rows,
        )
    for s in report["skipped"]:
        where = " ".join(str(s[k]) for k in ("contender", "env", "num_envs") if k in s)
        console.print(f"[yellow]skipped[/yellow] {where}: {s['reason']}")
    for note in report["notes"]:
        console.print(f"[yellow]note[/yellow]: {note}")
    print_conclusion(report, console)


def write(report: Dict[str, Any], out: Path) -> Path:
    """Write the JSON to ``out`` and the Markdown summary next to it; returns the ``.md``'s path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1, default=str)
        f.write("\n")
    md = out.with_suffix(".md")
    md.write_text(markdown_summary(report))
    return md
