"""Build the compiled core of vecenv.

The extension list and the one ``cythonize`` call live here; everything else
is in ``pyproject.toml``. Set ``VECENV_DEBUG=1`` to build with Cython's bounds
and wraparound checks on and C assertions enabled (used by CI once), and
``VECENV_ANNOTATE=1`` to write ``cython -a`` HTML next to the sources.
"""

import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("VECENV_DEBUG", "") not in ("", "0")
ANNOTATE = os.environ.get("VECENV_ANNOTATE", "") not in ("", "0")

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
}

extra_compile_args = ["-O0", "-g", "-UNDEBUG"] if DEBUG else ["-O3"]
define_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if DEBUG:
    # Read by csrc/_core.pyx into vecenv._core.DEBUG_BUILD.
    define_macros.append(("VECENV_DEBUG", "1"))
# pip builds in the source tree, and setuptools skips an extension whose built
# file is newer than its sources: a debug build sharing build/ with a release
# one would install the other mode's module. Each mode keeps its own tree.
build_base = "build/debug" if DEBUG else "build"

extensions = [
    Extension(
        "vecenv._core",
        sources=["csrc/_core.pyx"],
        include_dirs=["csrc", np.get_include()],
        define_macros=define_macros,
        extra_compile_args=extra_compile_args,
    )
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        annotate=ANNOTATE,
        build_dir=f"{build_base}/cython",
    ),
    options={"build": {"build_base": build_base}},
)
