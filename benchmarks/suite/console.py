"""Where the suite prints: rich when it is installed, plain lines otherwise (parent)."""

from __future__ import annotations

import re
import sys
from typing import Any, List


class Console:
    """rich when installed, plain lines otherwise."""

    def __init__(self):
        try:
            import rich.console

            # Not a terminal (a log file): wide lines instead of wrapped tables.
            self.rich = rich.console.Console(width=None if sys.stdout.isatty() else 140)
        except ImportError:
            self.rich = None

    def print(self, *args) -> None:
        if self.rich is not None:
            self.rich.print(*args)
        else:
            print(*[plain(a) for a in args])

    def progress(self, total: int) -> Any:
        if self.rich is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            p = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.rich,
                transient=False,
            )
            return _RichProgress(p, total)
        return _PlainProgress(total)

    def table(self, title: str, columns: List[str], rows: List[List[str]]) -> None:
        if self.rich is not None:
            from rich.table import Table

            t = Table(title=title, show_lines=False)
            for i, c in enumerate(columns):
                t.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
            for r in rows:
                t.add_row(*r)
            self.rich.print(t)
        else:
            print(f"\n{title}")
            print(" | ".join(columns))
            for r in rows:
                print(" | ".join(plain(x).replace("\n", " ") for x in r))


def plain(x) -> str:
    """``x`` as text without rich's markup (``[bold]``, ``[/yellow]``)."""
    return re.sub(r"\[/?[a-z ]+\]", "", str(x))


class _RichProgress:
    def __init__(self, progress, total):
        self.p = progress
        self.p.start()
        self.task = self.p.add_task("starting", total=total)

    def describe(self, text: str) -> None:
        self.p.update(self.task, description=text)

    def advance(self, n: int = 1) -> None:
        self.p.advance(self.task, n)

    def close(self) -> None:
        self.p.stop()


class _PlainProgress:
    def __init__(self, total):
        self.total, self.done = total, 0

    def describe(self, text: str) -> None:
        pass  # without rich: only the line after each cell (suite.command.run)

    def advance(self, n: int = 1) -> None:
        self.done += n

    def close(self) -> None:
        pass


def fmt_duration(seconds: float) -> str:
    """``"42 s"`` or ``"3 min 05 s"``: estimates, ETAs and elapsed times."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"
