"""Ref-name rules for names found in a writer's clone."""

from __future__ import annotations

import pytest

from writerpool.gitops.refnames import git_format_reason, refuse_reason

VALID = [
    "main",
    "feature/x-1",
    "fix/issue_42",
    "release-1.2",
    "user/ünïcode",
    "a/b/c/d",
    "add",
    "v1.0",
    "x" * 200,
]


@pytest.mark.parametrize("name", VALID)
def test_ordinary_branch_names_are_accepted(name: str) -> None:
    assert refuse_reason(name) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("../x", "'..'"),
        ("-x", "leading '-'"),
        ("--output=evil.txt", "leading '-'"),
        ("a..b", "'..'"),
        ("x.lock", ".lock"),
        ("dir/x.lock/y", ".lock"),
        ("a@{1}", "'@{'"),
        ("@", "'@'"),
        ("bad\x01name", "control character"),
        ("bad\x7fname", "control character"),
        ("tab\tname", "control character"),
        ("new\nline", "control character"),
        ("x" * 500, "longer than 200 bytes"),
        ("é" * 101, "longer than 200 bytes"),
        ("with space", "space"),
        ("tilde~1", "forbidden character"),
        ("caret^", "forbidden character"),
        ("co:lon", "forbidden character"),
        ("quest?", "forbidden character"),
        ("star*", "forbidden character"),
        ("brack[et", "forbidden character"),
        ("back\\slash", "forbidden character"),
        ("trailing/", "'/'"),
        ("/leading", "'/'"),
        ("double//slash", "empty path component"),
        ("ends.", "ends with '.'"),
        (".hidden", "starts with '.'"),
        ("dir/.hidden", "starts with '.'"),
        ("", "empty"),
        ("HEAD", "HEAD"),
        ("x/HEAD", "HEAD"),
        ("zero\u200bwidth", "non-printable"),
        ("nb\u00a0space", "non-printable"),
        ("bad\udcffbytes", "UTF-8"),
    ],
)
def test_unsafe_names_are_refused_with_a_reason(name: str, expected: str) -> None:
    reason = refuse_reason(name)
    assert reason is not None
    assert expected in reason


def test_git_rules_alone_allow_a_leading_dash_but_ours_do_not() -> None:
    # git's check-ref-format accepts refs/heads/-x; writerpool must not pass it to git
    assert git_format_reason("-x") is None
    assert refuse_reason("-x") == "leading '-'"


def test_limit_counts_bytes_not_characters() -> None:
    assert refuse_reason("é" * 100) is None  # 200 bytes
    assert refuse_reason("é" * 100 + "x") is not None
