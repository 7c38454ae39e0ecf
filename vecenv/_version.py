"""The version of vecenv: its one source (pyproject.toml reads it, vecenv/__init__.py re-exports it)."""

__version__ = "0.1.0"
