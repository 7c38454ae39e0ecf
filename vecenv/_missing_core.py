"""The ImportError message for a vecenv without its compiled core (parent side).

Imported only when ``vecenv._core`` fails to import: it tells an unbuilt source
checkout that shadows the installed package (Python puts the current folder or
the script's folder first on ``sys.path``) apart from a broken installation.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from typing import Optional


def _has_core(folder: str) -> bool:
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(n.startswith("_core") and n.endswith(tuple(suffixes)) for n in names)


def _installed_elsewhere(here: str) -> Optional[str]:
    """The folder of another vecenv on sys.path that has its core, or None."""
    for entry in sys.path:
        folder = os.path.join(entry or os.getcwd(), "vecenv")
        if os.path.realpath(folder) != os.path.realpath(here) and _has_core(folder):
            return folder
    return None


def missing_core_error(init_file: str, exc: BaseException) -> ImportError:
    """An ImportError that says what went wrong and how to fix it.

    Parameters
    ----------
    init_file : str
        ``vecenv.__file__`` of the package being imported.
    exc : BaseException
        The ImportError raised by ``from vecenv import _core``; chained as the
        cause, except for an unbuilt source checkout, where its "circular
        import" guess would mislead.
    """
    err = ImportError(_message(init_file, exc))
    err.__cause__ = None if _is_source_tree(init_file) else exc
    err.__suppress_context__ = True
    return err


def _is_source_tree(init_file: str) -> bool:
    here = os.path.dirname(os.path.abspath(init_file))
    csrc = os.path.join(os.path.dirname(here), "csrc", "_core.pyx")
    return os.path.exists(csrc) and not _has_core(here)


def _message(init_file: str, exc: BaseException) -> str:
    here = os.path.dirname(os.path.abspath(init_file))
    if _is_source_tree(init_file):
        other = _installed_elsewhere(here)
        shadowed = (
            f"it shadows the installed vecenv in {other}"
            if other
            else "no built vecenv is installed either"
        )
        return (
            f"vecenv was imported from its unbuilt source checkout ({here}), which has no "
            "compiled core (vecenv._core) beside it: Python put this folder's parent on "
            f"sys.path (it is the current folder or the script's folder), and {shadowed}. "
            "Fix: run Python from another folder, or with `python -P` (Python 3.11+) so the "
            "current folder is not searched first; or build the core in place with "
            "`pip install -e .` (needs a C compiler, Cython>=3 and numpy>=2 at build time)."
        )
    return (
        f"vecenv's compiled core (vecenv._core) is missing or broken in {here}: {exc}. "
        "Reinstall with `pip install .` (needs a C compiler, Cython>=3 and numpy>=2 at build "
        "time) or install a wheel."
    )
