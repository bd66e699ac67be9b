"""A small virtual environment for Spark's Python workers, made from the distributions installed here
(no registry), as a user would make one with `pip install` before `venv-pack`.

`make_worker_env(target)` creates a venv at `target` with `--copies` (a copy of the base interpreter:
Spark's unpacking fails on a venv's link to an absolute path) and copies into its site-packages what a
worker needs: exactly (this work tree's `src`), confluent-kafka, cramjam, crc32c, and pyarrow and pandas
with theirs (PySpark's Python data sources move rows as Arrow batches). PySpark itself is not copied:
Spark puts its own `pyspark.zip` on the workers' path. `with_exactly=False` leaves out exactly and its
dependencies.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what a worker imports besides PySpark (from its zip) and the standard library
WORKER_DISTRIBUTIONS = ("pyarrow", "pandas")
_NAME = re.compile(r"[A-Za-z0-9._-]+")


def requirements(names: tuple[str, ...]) -> list[str]:
    """`names` and every distribution they require, transitively (extras and absent ones left out)."""
    seen: list[str] = []
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # optional or for another platform
            continue
        seen.append(key)
        for requirement in requires:
            match = _NAME.match(requirement)
            if match and "extra ==" not in requirement:
                todo.append(match.group(0))
    return seen


def _site_packages(env: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return env / "lib" / version / "site-packages"


def _copy_distribution(name: str, target: Path) -> None:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:  # an optional dependency not installed here
        return
    for file in dist.files or []:
        source = Path(str(dist.locate_file(file)))
        if file.parts[0] == ".." or not source.is_file():  # scripts in bin/, absent files
            continue
        dest = target / file
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, dest)  # same file system: no copy
        except OSError:
            shutil.copy2(source, dest)


def make_worker_env(target: Path, with_exactly: bool = True) -> Path:
    """A venv at `target` for Spark's Python workers; returns its Python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", "--copies", str(target)], check=True)
    site = _site_packages(target)
    wanted = requirements((*WORKER_DISTRIBUTIONS, "exactly") if with_exactly else WORKER_DISTRIBUTIONS)
    for name in wanted:
        if name != "exactly":  # the installed one is the main checkout's, editable
            _copy_distribution(name, site)
    if with_exactly:
        shutil.copytree(
            ROOT / "src" / "exactly", site / "exactly", ignore=shutil.ignore_patterns("__pycache__")
        )
    return target / "bin" / "python"
