"""Collection from a clone an agent made hostile: unsafe ref names, and git settings,
hooks, attributes and alternates that would run programs if host git read them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    refs_of,
    run_agent,
    show,
    state_of,
    tree_files,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp
from tests.support.clones import clone_problems
from tests.support.repos import git_out, make_repo

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

LONG = "/".join(["n" * 99] * 5)  # 499 characters; git itself accepts it


@pytest.fixture
def alias() -> str:
    return unique_alias("hos")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=10, files=4)
    write_workspaces({alias: checkout})
    return checkout


def _git_dir_files(repo: Path) -> set[str]:
    root = repo / ".git"
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _plant_raw_refs(clone: Path, commit: str) -> list[str]:
    """Refs git would refuse to create, written as files (what an agent can do)."""
    heads = clone / ".git" / "refs" / "heads"
    planted = ["a..b", "x.lock", "@{", "ctl\x01name"]
    for name in planted:
        (heads / name).write_text(commit + "\n")
    (heads / "linked").symlink_to("/etc/passwd")
    packed = clone / ".git" / "packed-refs"
    packed.write_text(f"# pack-refs with: peeled fully-peeled sorted \n{commit} refs/heads/../x\n")
    return [*planted, "linked", "../x"]


def test_unsafe_names_are_refused_and_finish_stops(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(
        writer,
        f"""
git checkout -q -b good && echo g > g.txt && git add g.txt && git commit -q -m good
git update-ref refs/heads/-x HEAD
git update-ref refs/heads/{LONG} HEAD
git checkout -q main
echo wip > wip.txt
""",
    )
    clone = clone_of(writer)
    good = git_out(clone, "rev-parse", "good")
    planted = _plant_raw_refs(clone, good)
    operator_refs = refs_of(repo)
    operator_files = _git_dir_files(repo)

    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1
    refused = [f for f in report["findings"] if f["code"] == "ref_name_refused"]
    assert len(refused) == len(planted) + 2, report  # + "-x" and the long name
    assert "writer_collect_incomplete" in codes(report)
    assert "writer_collected" not in codes(report)
    # The safe refs were still imported...
    got = collected(repo, writer)
    assert set(got) == {"good", "main-wip"} and got["good"] == good
    # ...and nothing outside refs/remotes/writer-<name>/ changed or appeared.
    after = refs_of(repo)
    prefix = f"refs/remotes/writer-{writer}/"
    assert {k: v for k, v in after.items() if not k.startswith(prefix)} == operator_refs
    allowed = (
        "objects/",
        f"{prefix}",
        f"logs/{prefix}",
        "refs/remotes",
        "logs/refs/remotes",
        "logs",
    )
    new_files = _git_dir_files(repo) - operator_files
    assert all(f.startswith(allowed) for f in new_files), sorted(new_files)
    assert not (repo / ".git" / "x").exists() and not (repo / "x").exists()
    state = state_of(writer)
    assert state.collection is not None and not state.collection.complete

    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report)
    assert not {"writer_reset", "writer_recreated"} & set(codes(report))
    assert git_out(clone, "rev-parse", "good") == good, "finish must not reset"

    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]
    code, report = wp("writer", "reset", writer, "--discard", "--apply")
    assert code == 0 and "writer_reset" in codes(report), report
    assert sorted(os.listdir(clone / ".git" / "refs" / "heads")) == ["main"]


def _poison(clone: Path, tmp_path: Path) -> Path:
    """Write executing settings straight into the clone's files, as a hostile agent could."""
    canaries = tmp_path / "canaries"
    canaries.mkdir()
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {canaries}/ran-$$\ncat\n")
    evil.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    included = tmp_path / "included.config"
    included.write_text(f"[core]\n\tfsmonitor = {evil}\n\tpager = {evil}\n")
    alternate = tmp_path / "alternate-objects"
    alternate.mkdir()
    for hook in (
        "pre-commit",
        "post-checkout",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
        "post-merge",
    ):
        for where in (hooks, clone / ".git" / "hooks"):
            (where / hook).write_text(f"#!/bin/sh\ntouch {canaries}/hook-{hook}\n")
            (where / hook).chmod(0o755)
    with (clone / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {evil}\n\thooksPath = {hooks}\n\tpager = {evil}\n"
            f"\tsshCommand = {evil}\n\tattributesFile = {tmp_path}/attrs\n"
            # A clean filter that would also work inside a container (sh and sed exist
            # there): a WIP commit holding FORGED would show that git read this config.
            f'[filter "evil"]\n\tclean = "sh -c \'touch {canaries}/filter; sed s/later/FORGED/\'"'
            f"\n\tsmudge = {evil}\n\trequired = false\n"
            f'[diff "evil"]\n\ttextconv = {evil}\n'
            f"[include]\n\tpath = {included}\n"
            f'[includeIf "gitdir:/"]\n\tpath = {included}\n'
        )
    (tmp_path / "attrs").write_text("* filter=evil diff=evil\n")
    (clone / ".git" / "info").mkdir(exist_ok=True)
    (clone / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    (clone / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (clone / ".git" / "objects" / "info" / "alternates").write_text(f"{alternate}\n")
    return canaries


def test_poisoned_clone_is_collected_without_running_anything_on_the_host(
    repo: Path, tmp_path: Path, alias: str
) -> None:
    writer = ready_writer(alias)
    run_agent(
        writer,
        "git checkout -q -b work && echo w > w.txt && git add w.txt "
        "&& git commit -q -m work && echo later >> w.txt "
        # Modules named like the ones the in-container tool imports.
        "&& mkdir clonetool && echo 'raise SystemExit(3)' > clonetool/__main__.py "
        "&& touch clonetool/__init__.py && echo 'raise SystemExit(3)' > json.py",
    )
    clone = clone_of(writer)
    canaries = _poison(clone, tmp_path)
    assert clone_problems(clone), "the poison must be visible to the clone check"

    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0, report
    assert "writer_collected" in codes(report)
    assert "clone_verification_failed" in codes(report)
    got = collected(repo, writer)
    assert set(got) == {"work", "work-wip"}
    assert show(repo, f"{got['work-wip']}:w.txt") == "w\nlater\n"
    assert ".gitattributes" in tree_files(repo, got["work-wip"])
    assert list(canaries.iterdir()) == []

    # Finish collects again, then reset notices the poison and rebuilds the clone.
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 0, report
    assert {"writer_reset_failed", "writer_recreated"} <= set(codes(report)), report
    assert clone_problems(clone) == []
    assert not (clone / ".gitattributes").exists()
    assert list(canaries.iterdir()) == []


def test_an_unreadable_directory_makes_the_collection_incomplete(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(
        writer,
        "mkdir -p private && echo s > private/notes.txt && echo v > visible.txt "
        "&& chmod 000 private",
    )
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert "visible.txt" in tree_files(repo, collected(repo, writer)["main-wip"])
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 1 and "writer_reset" not in codes(report)
    code, report = wp("writer", "reset", writer, "--discard", "--apply")
    assert code == 0 and "writer_reset" in codes(report), report
    assert not (clone_of(writer) / "private").exists()
