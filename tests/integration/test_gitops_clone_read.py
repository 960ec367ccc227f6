"""Reading a writer clone's refs with dulwich and plain reads, as git would list them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support import require_tool
from tests.support.clones import clone_bundle
from tests.support.repos import commit_file, git_out, make_repo, run_git
from writerpool import proc
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.gitops.bundle import create_base_bundle
from writerpool.gitops.clone_read import DETACHED, read_refs
from writerpool.gitops.limits import LIMITS

pytestmark = pytest.mark.git


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("git")
    root = tmp_path_factory.mktemp("pristine")
    repo = make_repo(root / "operator", commits=6, files=2)
    run_git(repo, "tag", "-a", "-m", "annotated", "v1", "main~1")
    base = resolve_base(repo, "main")
    bundle = create_base_bundle(repo, base, True, root / "base.bundle")
    return clone_bundle(bundle, root / "clone", "main")


@pytest.fixture
def clone(pristine: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "clone"
    shutil.copytree(pristine, dest, symlinks=True)
    return dest


def _git_view(clone: Path, prefix: str) -> dict[str, str]:
    out = git_out(clone, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    return {
        ref.removeprefix(prefix): oid
        for oid, ref in (line.split(" ", 1) for line in out.splitlines())
    }


def test_fresh_clone_reads_as_its_baseline(clone: Path) -> None:
    refs = read_refs(clone)
    assert refs.head == "refs/heads/main"
    assert refs.head_commit == git_out(clone, "rev-parse", "HEAD")
    assert refs.branches == _git_view(clone, "refs/heads/")
    assert refs.tags == _git_view(clone, "refs/tags/")
    assert list(refs.tags) == ["v1"]
    assert refs.stash is False


def test_agent_work_shows_as_branches_stash_and_head(clone: Path) -> None:
    run_git(clone, "checkout", "-q", "-b", "feature/deep/name")
    commit_file(clone, "x.txt", "x\n", "work")
    (clone / "x.txt").write_text("changed\n")
    run_git(clone, "stash", "-q")
    run_git(clone, "pack-refs", "--all")  # some refs packed ...
    run_git(clone, "branch", "loose-one")  # ... and one loose
    refs = read_refs(clone)
    assert refs.head == "refs/heads/feature/deep/name"
    assert refs.head_commit == git_out(clone, "rev-parse", "HEAD")
    assert refs.branches == _git_view(clone, "refs/heads/")
    assert set(refs.branches) == {"main", "feature/deep/name", "loose-one"}
    assert refs.stash is True


def test_detached_head_is_reported(clone: Path) -> None:
    run_git(clone, "checkout", "-q", "--detach", "HEAD~2")
    refs = read_refs(clone)
    assert refs.head == DETACHED
    assert refs.head_commit == git_out(clone, "rev-parse", "HEAD")


def test_branch_git_would_refuse_is_still_seen(clone: Path) -> None:
    head = git_out(clone, "rev-parse", "HEAD")
    (clone / ".git" / "refs" / "heads" / "-evil").write_text(head + "\n")
    assert "-evil" in read_refs(clone).branches


def _expect_unreadable(clone: Path) -> None:
    with pytest.raises(WriterpoolError) as err:
        read_refs(clone)
    assert err.value.code == "clone_unreadable"
    assert str(clone) not in err.value.message


def test_symlinked_ref_is_refused_not_followed(clone: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("0" * 40 + "\n")
    (clone / ".git" / "refs" / "heads" / "leak").symlink_to(secret)
    _expect_unreadable(clone)


def test_symlinked_refs_directory_is_refused(clone: Path, tmp_path: Path) -> None:
    shutil.move(clone / ".git" / "refs" / "heads", tmp_path / "heads")
    (clone / ".git" / "refs" / "heads").symlink_to(tmp_path / "heads")
    _expect_unreadable(clone)


def test_fifo_ref_is_refused_without_blocking(clone: Path) -> None:
    os.mkfifo(clone / ".git" / "refs" / "heads" / "pipe")
    _expect_unreadable(clone)


def test_symlinked_head_is_refused(clone: Path, tmp_path: Path) -> None:
    (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")
    (clone / ".git" / "HEAD").unlink()
    (clone / ".git" / "HEAD").symlink_to(tmp_path / "HEAD")
    _expect_unreadable(clone)


def test_junk_ref_contents_are_refused(clone: Path) -> None:
    (clone / ".git" / "refs" / "heads" / "junk").write_text("not an object id\n")
    _expect_unreadable(clone)


def test_head_pointing_nowhere_is_refused(clone: Path) -> None:
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/missing\n")
    _expect_unreadable(clone)


def test_gitdir_file_and_commondir_are_refused(clone: Path, tmp_path: Path) -> None:
    (clone / ".git" / "commondir").write_text("..\n")
    _expect_unreadable(clone)
    (clone / ".git" / "commondir").unlink()
    shutil.move(clone / ".git", tmp_path / "moved.git")
    (clone / ".git").write_text(f"gitdir: {tmp_path / 'moved.git'}\n")
    _expect_unreadable(clone)


def test_corrupt_packed_refs_are_refused(clone: Path) -> None:
    (clone / ".git" / "packed-refs").write_text("# pack-refs with: peeled\nzzz refs/heads/x\n")
    _expect_unreadable(clone)


def test_reading_runs_no_process(
    clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("read_refs started a process")

    with (clone / ".git" / "config").open("a") as handle:
        handle.write(f"[core]\n\tfsmonitor = touch {tmp_path / 'CANARY'}\n")
    monkeypatch.setattr(proc, "run", refuse)
    monkeypatch.setattr(proc, "spawn", refuse)
    assert read_refs(clone).head == "refs/heads/main"
    assert not (tmp_path / "CANARY").exists()


def test_many_packed_and_loose_branches_are_all_read(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "many", commits=20, files=1)
    head = git_out(repo, "rev-parse", "HEAD")
    updates = "".join(f"create refs/heads/b/{number} {head}\n" for number in range(300))
    run_git(repo, "update-ref", "--stdin", input=updates.encode())
    run_git(repo, "pack-refs", "--all")
    run_git(repo, "branch", "loose")
    refs = read_refs(repo)
    assert len(refs.branches) == 302
    assert refs.branches == _git_view(repo, "refs/heads/")


def _pack_branches(clone: Path, count: int, name_bytes: int = 8) -> None:
    commit = git_out(clone, "rev-parse", "HEAD")
    lines = (f"{commit} refs/heads/b{i:0{name_bytes}d}\n" for i in range(count))
    with (clone / ".git" / "packed-refs").open("a") as handle:
        handle.writelines(lines)


def test_refs_past_the_count_cap_are_refused_before_the_rest_is_read(clone: Path) -> None:
    # 300,000 branches in packed-refs (about 18 MB, under the size cap): the read
    # stops at the count cap instead of building a map of every one.
    _pack_branches(clone, 300_000)
    with pytest.raises(WriterpoolError) as caught:
        read_refs(clone)
    assert caught.value.code == "clone_over_cap"
    assert str(LIMITS.refs) in caught.value.message


def test_packed_refs_past_the_size_cap_are_refused_unread(clone: Path) -> None:
    _pack_branches(clone, 1_500_000)
    assert (clone / ".git" / "packed-refs").stat().st_size > LIMITS.packed_refs_bytes
    with pytest.raises(WriterpoolError) as caught:
        read_refs(clone)
    assert caught.value.code == "clone_over_cap"


def test_loose_refs_past_the_count_cap_and_long_names_are_refused(clone: Path) -> None:
    heads = clone / ".git" / "refs" / "heads" / "many"
    heads.mkdir()
    commit = git_out(clone, "rev-parse", "HEAD") + "\n"
    for i in range(LIMITS.refs + 1):
        (heads / f"r{i}").write_text(commit)
    with pytest.raises(WriterpoolError) as caught:
        read_refs(clone)
    assert caught.value.code == "clone_over_cap"
    shutil.rmtree(heads)
    assert read_refs(clone).head == "refs/heads/main"
    _pack_branches(clone, 1, name_bytes=LIMITS.ref_name_bytes)
    with pytest.raises(WriterpoolError) as caught:
        read_refs(clone)
    assert caught.value.code == "clone_over_cap"
