"""The build's one option (everything else is in pyproject.toml).

`pip install .` installs pure Python. With `EXACTLY_COMPILE=1` the modules listed in
src/exactly/compiled.py are also compiled to C extensions with mypyc, which needs mypy, a C compiler and
Python's headers at build time (`pip install --no-build-isolation`; `make compiled`; docs/compiled.md).
"""

from __future__ import annotations

import os
import runpy
import shutil

from setuptools import Extension, setup


def compiled_extensions() -> list[Extension]:
    if os.environ.get("EXACTLY_COMPILE", "") in ("", "0"):
        return []
    from mypyc.build import mypycify

    modules = runpy.run_path(os.path.join("src", "exactly", "compiled.py"))["COMPILED_MODULES"]
    paths = [os.path.join("src", *name.split(".")) + ".py" for name in modules]
    # A fresh mypy cache and C directory per build: stale ones from an earlier build can disagree with the
    # sources. One extension for all the modules (mypyc's default): `separate=True` builds in parallel,
    # but its calls between modules cost a lone transaction ~15 % more broker CPU (docs/compiled.md).
    scratch = os.path.join("build", "mypyc")
    shutil.rmtree(scratch, ignore_errors=True)
    return mypycify([f"--cache-dir={scratch}/cache", *paths], target_dir=f"{scratch}/c")


setup(ext_modules=compiled_extensions())
