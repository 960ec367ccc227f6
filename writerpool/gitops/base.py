"""The base branch a writer starts from, resolved in the operator's checkout."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.gitops.hostgit import CommandFailed, git
from writerpool.gitops.refnames import git_format_reason

# A name made only of hex digits, as long as git's shortest default abbreviation,
# reads as an object name; bases are named branches, never raw hashes.
_HEX_NAME = re.compile(r"[0-9a-fA-F]{7,64}")
_FULL_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class BaseRef:
    """A resolved base: short name ("main", "origin/main"), full ref, commit id."""

    name: str
    ref: str
    commit: str

    @property
    def branch(self) -> str:
        """The branch name the writer's clone gets: the name without its remote.

        A local base keeps its name; `origin/feature` becomes `feature`.
        """
        if self.ref.startswith("refs/remotes/"):
            return self.ref.removeprefix("refs/remotes/").split("/", 1)[1]
        return self.ref.removeprefix("refs/heads/")


def validate_base_name(name: str) -> None:
    """Refuse anything but a plausible branch name (`base_ref_invalid`).

    Refused: `HEAD` (alone or as the last component, as in `origin/HEAD`), an
    all-hex name of 7 or more characters (it reads as a commit), a leading `-`, and
    whatever git's ref-name rules refuse. Shorter all-hex names such as `add` are
    accepted: they are only ever looked up as `refs/heads/<name>` or
    `refs/remotes/<name>`, never as object names.
    """
    if not name or name.startswith("-"):
        raise WriterpoolError("base_ref_invalid", "the base must be a branch name")
    if name == "HEAD" or name.endswith("/HEAD"):
        raise WriterpoolError("base_ref_invalid", "the base must be a named branch, not HEAD")
    if _HEX_NAME.fullmatch(name):
        raise WriterpoolError("base_ref_invalid", "the base must be a branch, not a commit id")
    if name.startswith("refs/"):
        raise WriterpoolError(
            "base_ref_invalid", "give the base as a short branch name, such as main"
        )
    reason = git_format_reason(name)
    if reason is not None or not name.isprintable():
        raise WriterpoolError(
            "base_ref_invalid", f"the base is not a valid branch name ({reason or 'unprintable'})"
        )


def _commit_of(repo: Path, ref: str) -> str | None:
    done = git(
        repo,
        "rev-parse",
        "-q",
        "--verify",
        "--end-of-options",
        f"{ref}^{{commit}}",
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        return None
    commit = done.out.strip()
    return commit if _FULL_HASH.fullmatch(commit) else None


def _branch_commit(repo: Path, ref: str) -> str | None:
    """The commit the branch `ref` names when it exists and names a commit, else None.
    for-each-ref reads that exact ref (rev-parse would also try refs/tags/<ref> and
    other spellings when it is missing, so a tag named refs/heads/x could stand in)."""
    done = git(repo, "for-each-ref", "--format=%(refname)%00%(objecttype)%00%(objectname)",
               ref, check=False, timeout=60)  # fmt: skip
    if done.returncode != 0:
        return None
    for line in done.out.splitlines():
        refname, _, rest = line.partition("\0")
        kind, _, commit = rest.partition("\0")
        if refname == ref and kind == "commit" and _FULL_HASH.fullmatch(commit):
            return commit
    return None


def _ref_exists(repo: Path, ref: str) -> bool:
    done = git(repo, "show-ref", "-q", "--verify", "--", ref, check=False, timeout=60)
    return done.returncode == 0


def resolve_base(repo: Path, name: str) -> BaseRef:
    """Resolve `name` as refs/heads/<name>, else refs/remotes/<name>, to a commit."""
    validate_base_name(name)
    local = f"refs/heads/{name}"
    try:
        # The usual case in one git process (every session's lease resolves its base).
        commit = _branch_commit(repo, local)
    except CommandFailed as exc:
        raise WriterpoolError("writer_base_unavailable", "the checkout cannot be read") from exc
    if commit is not None:
        return BaseRef(name=name, ref=local, commit=commit)
    for ref in (local, f"refs/remotes/{name}"):
        try:
            if not _ref_exists(repo, ref):
                continue
            commit = _commit_of(repo, ref)
        except CommandFailed as exc:
            raise WriterpoolError("writer_base_unavailable", "the checkout cannot be read") from exc
        if commit is None:
            raise WriterpoolError("writer_base_unavailable", f"base {name} is not a commit")
        return BaseRef(name=name, ref=ref, commit=commit)
    raise WriterpoolError("writer_base_unavailable", f"no branch named {name} in the checkout")


def default_base_name(repo: Path) -> str:
    """The base used when none is recorded or given.

    origin's symbolic HEAD (refs/remotes/origin/HEAD -> refs/remotes/origin/main)
    names the project's default branch. The operator's local branch of that name is
    preferred when it exists (it is their own view of it, and a fix round builds on
    local branches), else the remote-tracking name `origin/main`. Without an origin
    HEAD, local `main` is used; with neither, `writer_base_unavailable`.
    """
    try:
        done = git(repo, "symbolic-ref", "-q", "refs/remotes/origin/HEAD", check=False, timeout=60)
        target = done.out.strip() if done.returncode == 0 else ""
        if target.startswith("refs/remotes/origin/"):
            short = target.removeprefix("refs/remotes/")
            local = short.removeprefix("origin/")
            if git_format_reason(local) is None and _ref_exists(repo, f"refs/heads/{local}"):
                return local
            if _ref_exists(repo, target):
                return short
        if _ref_exists(repo, "refs/heads/main"):
            return "main"
    except CommandFailed as exc:
        raise WriterpoolError("writer_base_unavailable", "the checkout cannot be read") from exc
    raise WriterpoolError(
        "writer_base_unavailable", "no origin HEAD and no local main branch; give --base"
    )


def origin_url(repo: Path) -> str | None:
    """The operator's `remote.origin.url`, or None when there is none."""
    try:
        done = git(repo, "config", "--get", "remote.origin.url", check=False, timeout=60)
    except CommandFailed as exc:
        raise WriterpoolError("writer_base_unavailable", "the checkout cannot be read") from exc
    url = done.out.strip()
    return url if done.returncode == 0 and url else None


def url_has_userinfo(url: str) -> bool:
    """True when a URL carries userinfo, which writerpool never copies into a writer.

    URL syntax (`scheme://[userinfo@]host/...`): any userinfo counts, a user name
    alone too (`https://TOKEN@host`, `ssh://git@host`), because that slot is where
    tokens travel and a name cannot be told from a token.

    scp-like syntax (`[user@]host:path`): the user is an SSH login name and the
    syntax has no password field, so `git@github.com:org/repo` counts as having no
    userinfo and may be copied. A `:` before the `@` (`user:pw@host:path`) reads as
    a password and counts.
    """
    if _SCHEME.match(url):
        authority = re.split(r"[/?#]", url.split("://", 1)[1], maxsplit=1)[0]
        return "@" in authority
    user, at, _ = url.partition("@")
    return bool(at) and ":" in user


def copyable_origin(url: str) -> bool:
    """True when `url` may be written into a writer's clone as its origin.

    Refused: userinfo (see url_has_userinfo), control characters, a leading `-`,
    and transport-helper forms such as `ext::cmd` (they name a program to run).
    """
    if not url or url.startswith("-") or not url.isprintable() or url_has_userinfo(url):
        return False
    if "::" in url.split("/", 1)[0]:
        return False
    if _SCHEME.match(url):
        scheme = url.split("://", 1)[0].lower()
        return scheme in {"https", "http", "ssh", "git", "git+ssh", "ssh+git", "file"}
    return True
