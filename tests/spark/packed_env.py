"""A small virtual environment for Spark's Python workers, made from the distributions installed here
(no registry), as a user would make one with `pip install` before `venv-pack`.

`make_worker_env(target, with_exactly)` creates a venv at `target` (its interpreter a link to this one's
base Python, as `python -m venv` makes it) and copies into its site-packages what the data source needs
in a worker: exactly (this work tree's `src`) and confluent-kafka with their own dependencies, and
pyarrow and pandas (PySpark's Python data sources move rows as Arrow batches). PySpark itself is not
copied: Spark puts its own `pyspark.zip` on the workers' path. Without `with_exactly` the environment
lacks exactly and confluent-kafka, as a worker Python that was never given them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what a worker imports besides PySpark (from its zip) and the standard library
WORKER_DISTRIBUTIONS = ("pyarrow", "pandas", "numpy", "python-dateutil", "six", "pytz", "tzdata")
EXACTLY_DISTRIBUTIONS = ("confluent-kafka", "cramjam", "crc32c")


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
    for name in WORKER_DISTRIBUTIONS:
        _copy_distribution(name, site)
    if with_exactly:
        for name in EXACTLY_DISTRIBUTIONS:
            _copy_distribution(name, site)
        shutil.copytree(
            ROOT / "src" / "exactly", site / "exactly", ignore=shutil.ignore_patterns("__pycache__")
        )
    return target / "bin" / "python"
