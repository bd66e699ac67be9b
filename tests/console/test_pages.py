"""The console's pages are pure functions of their views: each page renders its facts, the fragment is the
inside of <main id="live"> only, and names from clients are escaped."""

from __future__ import annotations

import re

import pytest

from exactly.console.model import (
    BrokerRow,
    BrokersView,
    Decision,
    GroupMemberRow,
    GroupsView,
    GroupView,
    Isolation,
    LagRow,
    OpenTxnRow,
    PartitionRow,
    PreparedBatch,
    PreparedTxnRow,
    RecordRow,
    RecordsView,
    TopicsView,
    TopicView,
    TwoPhaseView,
    TxnRow,
    TxnsView,
    abort_command,
)
from exactly.console.pages import REFRESH_MS, Page, View, render, static_file

NOW = 1_700_000_000_000


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _txns(txn_id: str = "payments-1") -> TxnsView:
    command = abort_command("orders", 0, 40)
    return TxnsView(
        NOW,
        60_000,
        (
            TxnRow(txn_id, "Ongoing", 12, 3, 60_000, (("orders", 0),), 120_000, True, (command,)),
            TxnRow("quiet", "CompleteCommit", 13, 0, 60_000, (), -1, False, ()),
        ),
        (OpenTxnRow("orders", 0, 12, 3, 40, 119_000, txn_id, True),),
    )


VIEWS: dict[Page, View] = {
    Page.BROKERS: BrokersView(
        NOW,
        True,
        1,
        (
            BrokerRow(1, ("PLAINTEXT://h1:9092",), "r1", True, True, True),
            BrokerRow(2, ("PLAINTEXT://h2:9092",), None, False, False, True),
        ),
        10,
        5,
        (PartitionRow("orders", 3, 1, (1, 2), (1,)),),
        (),
        "off",
    ),
    Page.TOPICS: TopicsView(
        NOW,
        (
            TopicView(
                "orders",
                False,
                (PartitionRow("orders", 0, 1, (1,), (1,), 0, 40, 45, 45, 2048, 12.5),),
                100.0,
                2048.0,
                0.0,
            ),
        ),
        False,
    ),
    Page.GROUPS: GroupsView(
        NOW,
        (
            GroupView(
                "billing",
                "classic",
                "Stable",
                "range",
                (GroupMemberRow("m-1", "client-a", "/10.0.0.1", (("orders", 0),)),),
                (LagRow("orders", 0, 30, 45, "client-a"), LagRow("orders", 1, -1, 9, "")),
            ),
        ),
    ),
    Page.TRANSACTIONS: _txns(),
    Page.TWO_PHASE: TwoPhaseView(
        NOW,
        True,
        (
            PreparedBatch(
                "query-a",
                7,
                Decision.UNDECIDED,
                (PreparedTxnRow("query-a-7-0", 0, 20, 1, 5_000, (("out", 0),), None),),
                (),
            ),
            PreparedBatch(
                "query-a",
                6,
                Decision.COMMIT,
                (PreparedTxnRow("query-a-6-0", 0, 21, 1, 9_000, (("out", 1),), True),),
                ("query-a-6-0",),
            ),
        ),
        (("query-a", 6, 1),),
    ),
    Page.RECORDS: RecordsView(
        NOW,
        "orders",
        0,
        Isolation.READ_UNCOMMITTED,
        0,
        (
            RecordRow(0, NOW, "k", "hello", (), 5, True, None, False, False),
            RecordRow(1, NOW, "k", "gone", (), 6, True, None, True, False),
            RecordRow(2, NOW, None, None, (), 6, True, "ABORT", False, False),
            RecordRow(3, NOW, "k", "pending", (), 7, True, None, False, True),
        ),
        4,
        0,
        3,
        4,
        4,
        0,
    ),
}

EXPECTED = {
    Page.BROKERS: ["A ZooKeeper cluster of 2 brokers", "controller", "orders-3", "under-replicated", "Ready"],
    Page.TOPICS: ["orders", "LSO lag 5", "2.0 KiB", "in 100 records/s", "records"],
    Page.GROUPS: ["billing", "Stable", "client-a", "orders-0", "total lag 15"],
    Page.TRANSACTIONS: [
        "payments-1",
        "HANGING",
        "exactly txn abort --topic orders --partition 0 --start-offset 40",
        "2.0 min",
        "2 hanging",
    ],
    Page.TWO_PHASE: ["query query-a · batch 7", "waiting for decision", "commit", "query-a-6-0"],
    Page.RECORDS: ["hello", "aborted", "ABORT marker", "open transaction", "LSO 3"],
}


@pytest.mark.parametrize("page", list(Page))
def test_each_page_shows_its_facts(page: Page) -> None:
    html = render(page, VIEWS[page])
    assert html.startswith("<!doctype html>")
    assert f'data-refresh-ms="{REFRESH_MS}"' in html
    assert '<script src="/console/static/console.js"></script>' in html
    text = _text(html)
    for expected in EXPECTED[page]:
        assert expected in text, (page, expected)
    assert f'class="current" aria-current="page">{page.title}' in html


@pytest.mark.parametrize("page", list(Page))
def test_the_fragment_is_the_live_part_only(page: Page) -> None:
    fragment = render(page, VIEWS[page], fragment=True)
    assert "<html" not in fragment
    assert "<nav" not in fragment
    assert "<form" not in fragment
    full = render(page, VIEWS[page])
    inside = full.split('<main id="live" data-refresh-ms="2000">', 1)[1].split("</main>", 1)[0]
    assert _text(fragment).strip() == _text(inside).strip()


def test_names_from_clients_are_escaped() -> None:
    html = render(Page.TRANSACTIONS, _txns("<script>alert(1)</script>"))
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_hanging_rows_are_highlighted() -> None:
    html = render(Page.TRANSACTIONS, _txns())
    assert '<tr data-txn="payments-1" data-state="Ongoing" class="hanging">' in html
    assert '<tr data-txn="quiet" data-state="CompleteCommit">' in html


def test_the_user_is_shown_when_authenticated() -> None:
    assert '<span class="user">alice</span>' in render(Page.BROKERS, VIEWS[Page.BROKERS], user="alice")


def test_paths() -> None:
    assert Page.for_path("/console") is Page.BROKERS
    assert Page.for_path("/console/") is Page.BROKERS
    assert Page.for_path("/console/two-phase") is Page.TWO_PHASE
    assert Page.for_path("/console/nothing") is None


def test_static_files_ship_in_the_package() -> None:
    js = static_file("console.js")
    assert js is not None
    assert b"X-Console-Fragment" in js
    css = static_file("console.css")
    assert css is not None
    assert b"tr.hanging" in css
    assert static_file("../pages.py") is None
