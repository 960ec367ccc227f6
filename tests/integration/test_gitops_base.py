"""Resolving the base branch in an operator checkout, and which origin URLs are copied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import require_tool
from tests.support.repos import git_out, make_repo, run_git
from writerpool import proc
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import (
    copyable_origin,
    default_base_name,
    origin_url,
    resolve_base,
    url_has_userinfo,
    validate_base_name,
)


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    require_tool("git")
    repo = make_repo(tmp_path / "upstream", commits=5, files=3)
    run_git(repo, "branch", "feature", "main~2")
    return repo


@pytest.fixture
def checkout(upstream: Path, tmp_path: Path) -> Path:
    """A clone of upstream: origin/HEAD -> origin/main, local main, origin/feature."""
    dest = tmp_path / "checkout"
    run_git(tmp_path, "clone", "-q", "--", str(upstream), str(dest))
    return dest


@pytest.mark.git
def test_local_branch_resolves_to_its_commit(checkout: Path) -> None:
    base = resolve_base(checkout, "main")
    assert (base.name, base.ref) == ("main", "refs/heads/main")
    assert base.commit == git_out(checkout, "rev-parse", "main")
    assert base.branch == "main"


@pytest.mark.git
def test_remote_tracking_branch_resolves_and_names_the_clone_branch(checkout: Path) -> None:
    base = resolve_base(checkout, "origin/feature")
    assert base.ref == "refs/remotes/origin/feature"
    assert base.commit == git_out(checkout, "rev-parse", "origin/feature")
    assert base.branch == "feature"


@pytest.mark.git
def test_local_branch_wins_over_remote_tracking_of_the_same_name(checkout: Path) -> None:
    run_git(checkout, "branch", "origin/feature", "main")  # a local branch named origin/feature
    base = resolve_base(checkout, "origin/feature")
    assert base.ref == "refs/heads/origin/feature"
    assert base.commit == git_out(checkout, "rev-parse", "refs/heads/main")


@pytest.mark.git
def test_missing_branch_is_unavailable(checkout: Path) -> None:
    with pytest.raises(WriterpoolError) as err:
        resolve_base(checkout, "nope")
    assert err.value.code == "writer_base_unavailable"


@pytest.mark.git
def test_a_local_branch_at_a_tree_is_not_a_commit_and_no_remote_one_stands_in(
    checkout: Path,
) -> None:
    # origin/feature exists as a remote-tracking branch; the local one of that name
    # points at a tree: the local one is the base, and it is not a commit.
    tree = git_out(checkout, "rev-parse", "main^{tree}")
    ref = checkout / ".git" / "refs" / "heads" / "origin" / "feature"
    ref.parent.mkdir(parents=True)
    ref.write_text(tree + "\n")  # git itself refuses to put a tree on a branch
    with pytest.raises(WriterpoolError) as err:
        resolve_base(checkout, "origin/feature")
    assert (err.value.code, err.value.message) == (
        "writer_base_unavailable", "base origin/feature is not a commit"
    )  # fmt: skip


@pytest.mark.git
def test_a_tag_named_like_a_branch_never_stands_in_for_it(checkout: Path) -> None:
    # Tags whose names spell refs/heads/...: git's loose name lookup would find them.
    run_git(checkout, "tag", "refs/heads/origin/feature", "main")
    run_git(checkout, "tag", "refs/heads/only-a-tag", "main")
    base = resolve_base(checkout, "origin/feature")
    assert base.ref == "refs/remotes/origin/feature"
    assert base.commit == git_out(checkout, "rev-parse", "refs/remotes/origin/feature")
    with pytest.raises(WriterpoolError) as err:
        resolve_base(checkout, "only-a-tag")
    assert err.value.code == "writer_base_unavailable"


@pytest.mark.git
def test_tag_is_not_a_base(checkout: Path) -> None:
    run_git(checkout, "tag", "v1", "main")
    with pytest.raises(WriterpoolError) as err:
        resolve_base(checkout, "v1")
    assert err.value.code == "writer_base_unavailable"


@pytest.mark.git
@pytest.mark.parametrize(
    "name",
    [
        "HEAD",
        "origin/HEAD",
        "deadbeef",
        "0123456789abcdef0123456789abcdef01234567",
        "-x",
        "--output=evil.txt",
        "refs/heads/main",
        "a..b",
        "with space",
        "x.lock",
        "main@{1}",
        "main~1",
        "main^",
        "",
    ],
)
def test_unsafe_base_names_are_refused_and_run_nothing(checkout: Path, name: str) -> None:
    with pytest.raises(WriterpoolError) as err:
        resolve_base(checkout, name)
    assert err.value.code == "base_ref_invalid"
    assert not (checkout / "evil.txt").exists()


def test_short_hex_words_are_branch_names() -> None:
    validate_base_name("add")
    validate_base_name("cafe")


@pytest.mark.git
def test_default_base_prefers_the_local_branch_origin_head_names(checkout: Path) -> None:
    assert default_base_name(checkout) == "main"


@pytest.mark.git
def test_default_base_is_the_remote_branch_without_a_local_one(checkout: Path) -> None:
    run_git(checkout, "branch", "-m", "main", "work")
    assert default_base_name(checkout) == "origin/main"


@pytest.mark.git
def test_default_base_follows_a_non_main_origin_head(upstream: Path, tmp_path: Path) -> None:
    run_git(upstream, "branch", "-m", "main", "trunk")
    dest = tmp_path / "trunk-checkout"
    run_git(tmp_path, "clone", "-q", "--", str(upstream), str(dest))
    assert git_out(dest, "symbolic-ref", "refs/remotes/origin/HEAD") == "refs/remotes/origin/trunk"
    assert default_base_name(dest) == "trunk"


@pytest.mark.git
def test_default_base_without_origin_is_local_main(upstream: Path) -> None:
    assert default_base_name(upstream) == "main"


@pytest.mark.git
def test_default_base_without_origin_or_main_is_unavailable(upstream: Path) -> None:
    run_git(upstream, "branch", "-m", "main", "trunk")
    with pytest.raises(WriterpoolError) as err:
        default_base_name(upstream)
    assert err.value.code == "writer_base_unavailable"


@pytest.mark.git
def test_origin_url_is_read_or_none(checkout: Path, upstream: Path) -> None:
    assert origin_url(checkout) == str(upstream)
    assert origin_url(upstream) is None


@pytest.mark.git
def test_origin_is_read_without_the_users_global_config(
    upstream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = tmp_path / "global.gitconfig"
    hostile.write_text('[remote "origin"]\n\turl = https://global.invalid/x.git\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(hostile))
    # control: a git that inherits the environment does see the global value
    plain = proc.run(
        ["git", "-C", str(upstream), "config", "--get", "remote.origin.url"], env=dict(os.environ)
    )
    assert "global.invalid" in plain.out
    assert origin_url(upstream) is None


@pytest.mark.parametrize(
    ("url", "has"),
    [
        ("https://user:pw@example.com/org/repo.git", True),
        ("https://ghp_token@example.com/org/repo.git", True),
        ("ssh://user@example.com/org/repo.git", True),
        ("ssh://git@example.com:22/org/repo.git", True),
        ("HTTPS://u:p@example.com/x", True),
        ("git@github.com:org/repo.git", False),
        ("user:pw@example.com:org/repo.git", True),
        ("https://example.com/org/repo.git", False),
        ("https://example.com/path/with@sign", False),
        ("ssh://example.com/org/repo.git", False),
        ("/srv/git/repo.git", False),
        ("/srv/git/we@ird/repo.git", False),
        ("file:///srv/git/repo.git", False),
        ("example.com:org/repo.git", False),
    ],
)
def test_userinfo_is_detected(url: str, has: bool) -> None:
    assert url_has_userinfo(url) is has


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("git@github.com:org/repo.git", True),
        ("https://example.com/org/repo.git", True),
        ("/srv/git/repo.git", True),
        ("https://u:p@example.com/x", False),
        ("ext::sh -c touch% /tmp/pwned", False),
        ("fd::17", False),
        ("-oProxyCommand=x", False),
        ("https://example.com/x\nmore", False),
        ("gopher://example.com/x", False),
        ("", False),
    ],
)
def test_only_plain_origin_urls_are_copyable(url: str, ok: bool) -> None:
    assert copyable_origin(url) is ok
