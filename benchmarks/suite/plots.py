"""The PNGs of a run: vecenv's fastest way against the fastest peer, and every contender (parent).

matplotlib is optional: without it each function returns the note to print.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from .contenders import is_vecenv


def plot_summary(report: Dict[str, Any], path: Path) -> Optional[str]:
    """Per env: vecenv's fastest way, the fastest peer and the ideal against
    num_envs (each point of the peer's line names the peer)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullLocator
    except ImportError:
        return "matplotlib is not installed: no plot"
    rows = report.get("conclusion") or []
    envs = [e for e in report["envs"] if any(r["env"] == e for r in rows)]
    if not envs:
        return "nothing measured: no plot"
    # Two panels a row, at a size that stays readable at the docs' page width
    # (every contender, one line each, is the -all.png).
    cols = min(2, len(envs))
    nrows = (len(envs) + cols - 1) // cols
    plt.rcParams.update({"font.size": 11})
    fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 4.4 * nrows), squeeze=False)
    ns = sorted({c["num_envs"] for c in report["cells"]})
    for ax, env in zip(axes.flat, envs):
        mine = [r for r in rows if r["env"] == env]
        ours = [(r["num_envs"], r["vecenv_env_steps_per_s"]) for r in mine if r["vecenv_best"]]
        peer = [
            (r["num_envs"], r["best_peer_env_steps_per_s"], r["best_peer"])
            for r in mine
            if r["best_peer"]
        ]
        if ours:
            ax.plot(
                *zip(*ours),
                marker="o",
                linewidth=2,
                color="tab:blue",
                label="vecenv (its fastest way)",
            )
        if peer:
            x, y, who = zip(*peer)
            ax.plot(x, y, marker="s", color="tab:orange", label="fastest peer (named)")
            for xi, yi, w in peer:
                ax.annotate(
                    w,
                    (xi, yi),
                    textcoords="offset points",
                    xytext=(0, -14),
                    fontsize=9,
                    ha="center",
                )
        ideal = sorted(
            (c["num_envs"], c["ideal_env_steps_per_s"])
            for c in report["cells"]
            if c["env"] == env and c["ideal_env_steps_per_s"]
        )
        if ideal:
            ax.plot(*zip(*ideal), "k--", marker="x", label="ideal (cores x one raw env)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env-steps/s")
        ax.set_title(env)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=9, loc="best")
    for ax in list(axes.flat)[len(envs) :]:
        ax.set_visible(False)
    m = report["machine"]
    fig.suptitle(
        f"vecenv against the fastest peer; {m['cpu_model']}, {m['usable_cores']} usable cores\n"
        f"(every contender: {path.stem}-all.png)",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def plot_all(report: Dict[str, Any], path: Path) -> Optional[str]:
    """env-steps/s against num_envs, one panel per env, one line per contender."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullLocator
    except ImportError:
        return "matplotlib is not installed: no plot"
    envs = [e for e in report["envs"] if any(c["env"] == e for c in report["cells"])]
    if not envs:
        return "nothing measured: no plot"
    has_latency = any(e["env"] == "noop" and e["latency_us_per_call"] for e in report["results"])
    panels = len(envs) + int(has_latency)
    cols = min(3, panels)
    rows = (panels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    # vecenv's contenders solid and thick, the peers dashed, each set in its
    # own distinct colours (tab10), so no two lines look alike.
    palette = plt.get_cmap("tab10").colors
    ours = [n for n in report["contenders"] if is_vecenv(n)]
    peers = [n for n in report["contenders"] if not is_vecenv(n)]
    color = {n: palette[i % 10] for group in (ours, peers) for i, n in enumerate(group)}

    def lines(ax, env, value):
        for name in report["contenders"]:
            pts = sorted(
                (e["num_envs"], value(e))
                for e in report["results"]
                if e["env"] == env and e["contender"] == name and value(e)
            )
            if pts:
                x, y = zip(*pts)
                mine = is_vecenv(name)
                ax.plot(
                    x,
                    y,
                    marker="o" if mine else "s",
                    linestyle="-" if mine else "--",
                    linewidth=2 if mine else 1.2,
                    label=name,
                    color=color[name],
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ns = sorted({c["num_envs"] for c in report["cells"]})
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("num_envs")
        ax.grid(True, which="both", alpha=0.3)

    for ax, env in zip(axes.flat, envs):
        lines(ax, env, lambda e: e["env_steps_per_s"]["median"])
        ideal = sorted(
            (c["num_envs"], c["ideal_env_steps_per_s"])
            for c in report["cells"]
            if c["env"] == env and c["ideal_env_steps_per_s"]
        )
        if ideal:
            x, y = zip(*ideal)
            ax.plot(x, y, "k--", label="ideal (cores x raw env)")
        ax.set_title(env)
        ax.set_ylabel("env-steps/s")
    if has_latency:
        ax = axes.flat[len(envs)]
        lines(ax, "noop", lambda e: (e["latency_us_per_call"] or {}).get("p50"))
        ax.set_title("noop: latency per batch step (p50)")
        ax.set_ylabel("microseconds")
    handles: Dict[str, Any] = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    for ax in list(axes.flat)[panels:]:
        ax.set_visible(False)
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="lower center",
        ncol=min(6, len(handles)),
        fontsize=8,
        frameon=False,
    )
    m = report["machine"]
    fig.suptitle(
        f"{m['cpu_model']}, {m['usable_cores']} usable cores; vecenv {report['versions'].get('vecenv')}"
        f" @ {(report['git'].get('commit') or '?')[:8]}",
        fontsize=9,
    )
    legend_rows = (len(handles) + 5) // 6
    fig.tight_layout(rect=(0, (0.25 + 0.2 * legend_rows) / (4.2 * rows), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
