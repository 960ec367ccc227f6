"""The words and pure decisions of the daily loop: review refs that move aside or stay,
what a lease does first, the open networks' plan, and the docs that describe them."""

from __future__ import annotations

from pathlib import Path

import pytest

from writerpool.config.network import NETWORKS, describe
from writerpool.gitops.base import BaseRef
from writerpool.pool.claims.refresh import Refresh
from writerpool.pool.collect.review_list import ref_rows, rows_text
from writerpool.pool.collect.review_refs import replaced_by, staying
from writerpool.pool.status.writers import WriterStatus, fix_round_next

DOCS = Path(__file__).resolve().parents[2] / "docs"
P = "refs/remotes/writer-demo-w1/"


def test_a_collection_moves_only_what_it_overwrites_or_nests_with() -> None:
    old = {P + "feat-a": "a" * 40, P + "topic": "b" * 40, P + "same": "c" * 40}
    new = {P + "feat-b": "d" * 40, P + "topic/sub": "e" * 40, P + "same": "c" * 40}
    replaced = replaced_by(old, new)
    assert replaced == {P + "topic": "b" * 40}
    assert staying(old, new, replaced) == [P + "feat-a"]
    overwritten = replaced_by({P + "fix": "a" * 40}, {P + "fix": "f" * 40})
    assert overwritten == {P + "fix": "a" * 40}


def test_review_refs_are_listed_with_why_prune_would_drop_them() -> None:
    aside = "refs/remotes/writer-demo-w1@20260101T120000Z/topic"
    mine = {P + "third": "a" * 40, P + "topic/sub": "b" * 40, aside: "c" * 40}
    rows = ref_rows(mine, {P + "third"}, "refs/remotes/writer-demo-w1@")
    assert rows_text(rows) == (
        "writer-demo-w1/third (merged), writer-demo-w1/topic/sub, "
        "writer-demo-w1@20260101T120000Z/topic (moved aside)"
    )
    assert rows_text([]) == "none", "an empty list says so"


def test_what_a_lease_does_first_in_words() -> None:
    base = BaseRef("main", "refs/heads/main", "1" * 40)
    assert not Refresh((), base, "1" * 40, 0).needed
    moved = Refresh((), base, "2" * 40, 3)
    assert moved.needed and moved.text() == "at lease: moves it to main at 111111111111"
    both = Refresh(("2 ignored file(s): a, b",), base, "2" * 40, 3)
    assert both.text().startswith("at lease: removes leftovers (2 ignored file(s)")
    assert both.to_json() == {"leftovers": ["2 ignored file(s): a, b"], "behind": 3,
                              "moveTo": "1" * 40}  # fmt: skip


def test_a_fix_round_says_how_to_use_it_and_how_it_ends_not_how_to_undo_it() -> None:
    advice = fix_round_next("demo", "demo-w1", "fix", "main")
    assert advice.startswith('pi_session_start {"workspace": "demo", "base": "fix"} gets it')
    assert "writerpool writer finish demo-w1 --apply" in advice and "to main" in advice
    assert "--base main" not in advice, "the remedy must not move the writer back at once"
    row = WriterStatus(
        name="demo-w1", workspace="demo", phase="ready", base="fix", workspace_base="main",
        lifecycle="persistent", network="none", code="writer_leasable", reason="",
        next=advice,
    )  # fmt: skip
    assert row.text().startswith(f"leasable for sessions on base fix: {advice}; phase ready")
    on_main = WriterStatus(
        name="demo-w1", workspace="demo", phase="ready", base="main", workspace_base="main",
        lifecycle="persistent", network="none", code="writer_leasable", reason="",
    )  # fmt: skip
    assert on_main.text().startswith("leasable: phase ready, base main")


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_each_network_says_limited_or_not_once(kind: str) -> None:
    text = describe(kind)
    if NETWORKS[kind].limited:
        assert "NOT limited" not in text
    else:
        assert text.count("NOT limited") == 1, text
        assert "the key is copied in" in text, text


def test_docs_place_read_only_sessions_in_a_container_and_prune_images() -> None:
    tools = (DOCS / "tools.md").read_text()
    assert "| read-only | any | on the host" not in tools
    assert "checkout mounted read-only" in tools
    image = (DOCS / "image.md").read_text()
    assert "remove old images with `podman rmi`" not in image
    assert "`writerpool image prune` plans, and with `--apply` removes" in image
