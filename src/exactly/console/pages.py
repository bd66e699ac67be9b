"""The console's pages: HTML rendered from the views of exactly.console.model by Jinja2 templates.

Pure: `render(page, view, fragment=...)` is a function of its arguments (the templates and the two static
files ship in this package; nothing is fetched at run time, there is no build step). A full page is the
navigation, the page's controls (forms: kept while the page updates) and `<main id="live">`; a fragment
is only what goes inside `<main id="live">`. The page's script (static/console.js, vanilla JavaScript)
fetches the fragment of the same address every `REFRESH_MS` with the header `X-Console-Fragment: 1` and
swaps it in, so the page updates without reloading.

Addresses (all GET, under /console/):

    /console/                  brokers: this broker, the cluster's brokers, ISR problems, readiness
    /console/topics            topics and partitions: log start, LSO, HW, LEO, size, rates (?internal=1)
    /console/groups            consumer groups: members, assignments, lag per partition
    /console/transactions      transactional ids; open transactions in partition logs; hanging ones
    /console/two-phase         prepared transactions by Spark query and batch, with their decision
    /console/records           ?topic=&partition=&offset=&isolation=read_committed|read_uncommitted
    /console/static/<file>     console.js, console.css
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from exactly.console.model import (
    BrokersView,
    GroupsView,
    RecordsView,
    TopicsView,
    TwoPhaseView,
    TxnsView,
)

__all__ = ["REFRESH_MS", "STATIC_FILES", "Page", "View", "render", "static_file"]

REFRESH_MS = 2000

View = BrokersView | TopicsView | GroupsView | TxnsView | TwoPhaseView | RecordsView


@dataclass(frozen=True, slots=True)
class _PageInfo:
    path: str
    title: str
    template: str


class Page(Enum):
    BROKERS = _PageInfo("/console/", "Brokers", "brokers.html")
    TOPICS = _PageInfo("/console/topics", "Topics", "topics.html")
    GROUPS = _PageInfo("/console/groups", "Consumer groups", "groups.html")
    TRANSACTIONS = _PageInfo("/console/transactions", "Transactions", "transactions.html")
    TWO_PHASE = _PageInfo("/console/two-phase", "Two-phase commit", "two_phase.html")
    RECORDS = _PageInfo("/console/records", "Records", "records.html")

    @property
    def path(self) -> str:
        return self.value.path

    @property
    def title(self) -> str:
        return self.value.title

    @classmethod
    def for_path(cls, path: str) -> Page | None:
        wanted = path if path != "/console" else "/console/"
        return next((page for page in cls if page.path == wanted), None)


STATIC_FILES = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}


def static_file(name: str) -> bytes | None:
    """The bytes of one of the console's static files (None for any other name)."""
    if name not in STATIC_FILES:
        return None
    return resources.files("exactly.console").joinpath("static", name).read_bytes()


def _bytes(n: int) -> str:
    if n < 0:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _age(ms: int) -> str:
    if ms < 0:
        return "-"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _rate(per_s: float) -> str:
    if per_s <= 0:
        return "0"
    if per_s < 10:
        return f"{per_s:.1f}"
    return f"{per_s:,.0f}"


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _offset(n: int) -> str:
    return "-" if n < 0 else str(n)


def _partitions(pairs: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in pairs) or "-"


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "-"


_ENV = Environment(
    loader=PackageLoader("exactly.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(
    bytes=_bytes, age=_age, rate=_rate, time=_time, offset=_offset, partitions=_partitions, ids=_ids
)


def render(page: Page, view: View, *, fragment: bool = False, user: str | None = None) -> str:
    """The page (or, `fragment`, the inside of its `<main id="live">`) for `view`."""
    context: dict[str, Any] = {
        "view": view,
        "page": page,
        "pages": list(Page),
        "fragment": fragment,
        "refresh_ms": REFRESH_MS,
        "user": user,
    }
    return _ENV.get_template(page.value.template).render(context)
