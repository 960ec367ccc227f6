"""The clone check refuses every planted setting or file that would run or redirect git,
and never triggers one itself: clonetool's gitsnap answers its probe (as it does in the
inspection's container) and gitops/verify.py judges the answers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support import require_tool
from tests.support.clones import clone_bundle, clone_problems
from tests.support.repos import make_repo, run_git
from writerpool import proc
from writerpool.gitops.base import resolve_base
from writerpool.gitops.bundle import create_base_bundle

pytestmark = pytest.mark.git


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("git")
    root = tmp_path_factory.mktemp("pristine")
    repo = make_repo(root / "operator", commits=3, files=2)
    base = resolve_base(repo, "main")
    bundle = create_base_bundle(repo, base, False, root / "base.bundle")
    return clone_bundle(bundle, root / "clone", "main", "git@example.com:o/r.git")


@pytest.fixture
def clone(pristine: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "clone"
    shutil.copytree(pristine, dest, symlinks=True)
    return dest


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return tmp_path / "CANARY"


def _plant(clone: Path, text: str, *, replace: bool = False) -> None:
    with (clone / ".git" / "config").open("w" if replace else "a") as handle:
        handle.write(text)


def _git_plain(clone: Path, *args: str) -> proc.Completed:
    """git in the planted clone as a careless host would run it (controls only)."""
    return proc.run(["git", "-C", str(clone), *args], env=dict(os.environ), check=False)


def test_a_fresh_clone_is_safe(clone: Path) -> None:
    assert clone_problems(clone) == []


def test_sample_hooks_are_allowed(clone: Path) -> None:
    (clone / ".git" / "hooks").mkdir()
    (clone / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\nexit 1\n")
    assert clone_problems(clone) == []


CMD = "touch {canary}"

# (config text planted, the key verify must name); {canary} is a file under tmp_path.
DANGEROUS = [
    ("[core]\n\tfsmonitor = touch {canary}\n", "core.fsmonitor"),
    ("[core]\n\thooksPath = {hooks}\n", "core.hookspath"),
    ("[core]\n\tsshCommand = touch {canary}\n", "core.sshcommand"),
    ("[core]\n\tpager = touch {canary}\n", "core.pager"),
    ("[core]\n\teditor = touch {canary}\n", "core.editor"),
    ("[core]\n\taskPass = touch {canary}\n", "core.askpass"),
    ("[core]\n\tgitProxy = touch {canary}\n", "core.gitproxy"),
    ("[core]\n\talternateRefsCommand = touch {canary}\n", "core.alternaterefscommand"),
    ("[core]\n\tworktree = /\n", "core.worktree"),
    ("[core]\n\tattributesFile = /etc/passwd\n", "core.attributesfile"),
    ("[core]\n\texcludesFile = /etc/passwd\n", "core.excludesfile"),
    ("[include]\n\tpath = /etc/passwd\n", "include.path"),
    ('[includeIf "gitdir:/"]\n\tpath = /etc/passwd\n', "includeif.*.path"),
    ('[filter "x"]\n\tclean = touch {canary}\n', "filter.*.clean"),
    ('[filter "x"]\n\tsmudge = touch {canary}\n', "filter.*.smudge"),
    ('[filter "x"]\n\tprocess = touch {canary}\n', "filter.*.process"),
    ('[diff "x"]\n\ttextconv = touch {canary}\n', "diff.*.textconv"),
    ('[diff "x"]\n\tcommand = touch {canary}\n', "diff.*.command"),
    ("[diff]\n\texternal = touch {canary}\n", "diff.external"),
    ("[diff]\n\ttool = x\n", "diff.tool"),
    ('[difftool "x"]\n\tcmd = touch {canary}\n', "difftool.*.cmd"),
    ('[merge "x"]\n\tdriver = touch {canary}\n', "merge.*.driver"),
    ("[merge]\n\ttool = x\n", "merge.tool"),
    ('[mergetool "x"]\n\tcmd = touch {canary}\n', "mergetool.*.cmd"),
    ("[credential]\n\thelper = !touch {canary}\n", "credential.helper"),
    ('[credential "https://example.com"]\n\thelper = !touch {canary}\n', "credential.*.helper"),
    ("[sequence]\n\teditor = touch {canary}\n", "sequence.editor"),
    ("[pager]\n\tlog = touch {canary}\n", "pager.log"),
    ("[alias]\n\tst = !touch {canary}\n", "alias.st"),
    ("[alias]\n\tlg = log --oneline\n", "alias.lg"),
    ("[gpg]\n\tprogram = touch {canary}\n", "gpg.program"),
    ('[gpg "ssh"]\n\tprogram = touch {canary}\n', "gpg.*.program"),
    ("[commit]\n\tgpgSign = true\n", "commit.gpgsign"),
    ("[commit]\n\ttemplate = /etc/passwd\n", "commit.template"),
    ("[log]\n\tshowSignature = true\n", "log.showsignature"),
    ('[remote "origin"]\n\tuploadpack = touch {canary}\n', "remote.*.uploadpack"),
    ('[remote "origin"]\n\treceivepack = touch {canary}\n', "remote.*.receivepack"),
    ('[remote "origin"]\n\tproxy = http://proxy.invalid\n', "remote.*.proxy"),
    ('[remote "origin"]\n\tvcs = evil\n', "remote.*.vcs"),
    ('[remote "evil"]\n\turl = ext::sh -c touch% {canary}\n', "remote.*.url"),
    ('[remote "evil"]\n\tpushurl = https://user:pw@example.com/x\n', "remote.*.pushurl"),
    ('[remote "evil"]\n\tpromisor = true\n', "remote.*.promisor"),
    ("[http]\n\tproxy = http://proxy.invalid\n", "http.proxy"),
    ('[http "https://example.com"]\n\tproxy = http://proxy.invalid\n', "http.*.proxy"),
    ("[http]\n\tcookieFile = /etc/passwd\n", "http.cookiefile"),
    ("[uploadpack]\n\tpackObjectsHook = touch {canary}\n", "uploadpack.packobjectshook"),
    ('[url "ext::sh -c touch% {canary}"]\n\tinsteadOf = https://\n', "url.*.insteadof"),
    ('[url "https://evil.invalid/"]\n\tpushInsteadOf = https://\n', "url.*.pushinsteadof"),
    ('[submodule "x"]\n\tupdate = !touch {canary}\n', "submodule.*.update"),
    ('[fetch "fsck"]\n\tskipList = /etc/passwd\n', "fetch.*.skiplist"),
    ("[fsck]\n\tskipList = /etc/passwd\n", "fsck.skiplist"),
    ("[protocol]\n\tallow = always\n", "protocol.allow"),
    ('[protocol "ext"]\n\tallow = always\n', "protocol.*.allow"),
    ("[init]\n\ttemplateDir = /tmp\n", "init.templatedir"),
    ("[extensions]\n\tworktreeConfig = true\n", "extensions.worktreeconfig"),
    ("[receive]\n\tprocReceiveRefs = refs/for\n", "receive.procreceiverefs"),
    ("[trace2]\n\tnormalTarget = /tmp/trace\n", "trace2.normaltarget"),
    ("[safe]\n\tdirectory = *\n", "safe.directory"),
    ("[user]\n\tsigningKey = /root/.ssh/id_ed25519\n", "user.signingkey"),
    ("[maintenance]\n\tauto = true\n", "maintenance.auto"),
    ("[frobnicate]\n\tsetting = 1\n", "frobnicate.setting"),
    ("[interactive]\n\tdiffFilter = touch {canary}\n", "interactive.difffilter"),
    # spellings git accepts: case, layout, old subsection syntax, repeated sections
    ("[CORE]\n\tFSMONITOR = touch {canary}\n", "core.fsmonitor"),
    ("[Core]\n\tfsMonitor=touch {canary}\n", "core.fsmonitor"),
    ("[core] fsmonitor = touch {canary}\n", "core.fsmonitor"),
    ("[core]\n\tfsmonitor\n", "core.fsmonitor"),
    ("[core]\n\tbare = false\n[core]\n\tsshcommand = touch {canary}\n", "core.sshcommand"),
    ("[remote.origin]\n\tuploadpack = touch {canary}\n", "remote.*.uploadpack"),
    ('[FILTER "X"]\n\tCLEAN = touch {canary}\n', "filter.*.clean"),
    ('[core "x"]\n\tfsmonitor = touch {canary}\n', "core.*.fsmonitor"),
    ('[core.x "y"]\n\tfsmonitor = touch {canary}\n', "core.x.*.fsmonitor"),
    ('[core]\n\tfsmonitor = "touch {canary}" ; a comment\n', "core.fsmonitor"),
]


@pytest.mark.parametrize(("text", "key"), DANGEROUS, ids=[k for _, k in DANGEROUS])
def test_dangerous_setting_is_refused_and_not_run(
    clone: Path, canary: Path, tmp_path: Path, text: str, key: str
) -> None:
    _plant(clone, text.format(canary=canary, hooks=tmp_path / "hooks"))
    problems = clone_problems(clone)
    assert any(p.startswith(f"{key}:") for p in problems), problems
    assert not canary.exists()
    assert all(str(tmp_path) not in p and "/etc/passwd" not in p for p in problems)


@pytest.mark.parametrize(
    "text",
    [
        "[CORE]\n\tFSMONITOR = touch {canary}\n",
        "[core] fsmonitor = touch {canary}\n",
        "[Core]\n\tfsMonitor=touch {canary}\n",
        '[core]\n\tfsmonitor = "touch {canary}" ; a comment\n',
    ],
)
def test_git_itself_honours_the_spellings_verify_refuses(
    clone: Path, canary: Path, text: str
) -> None:
    """Control: these plants are live; a git status in the clone runs them."""
    _plant(clone, text.format(canary=canary))
    assert clone_problems(clone)
    _git_plain(clone, "status")
    assert canary.exists()


def test_planted_hook_path_is_live_for_git_but_not_for_verify(
    clone: Path, canary: Path, tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text(f"#!/bin/sh\ntouch {canary}\n")
    (hooks / "pre-commit").chmod(0o755)
    _plant(clone, f"[core]\n\thooksPath = {hooks}\n")
    assert clone_problems(clone) == ["core.hookspath: redirects hooks"]
    assert not canary.exists()
    _git_plain(clone, "commit", "-q", "--allow-empty", "-m", "x")
    assert canary.exists()


def test_planted_filter_is_live_for_git_but_not_for_verify(clone: Path, canary: Path) -> None:
    _plant(clone, f'[filter "x"]\n\tclean = "touch {canary}; cat"\n')
    (clone / ".gitattributes").write_text("*.txt filter=x\n")
    (clone / "a.txt").write_text("a\n")
    assert clone_problems(clone) == ["filter.*.clean: runs a filter command"]
    assert not canary.exists()
    _git_plain(clone, "add", "a.txt")
    assert canary.exists()


def test_planted_alias_is_live_for_git_but_not_for_verify(clone: Path, canary: Path) -> None:
    _plant(clone, f"[alias]\n\tst = !touch {canary}\n")
    assert clone_problems(clone) == ["alias.st: defines a command alias"]
    assert not canary.exists()
    _git_plain(clone, "st")
    assert canary.exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[core\n\tfsmonitor = x\n", "config: cannot be parsed"),
        ("fsmonitor = x\n", "config: cannot be parsed"),
        ("[core]\n\tbad_name = 1\n", "config: cannot be parsed"),
        ("[remote origin]\n\turl = x\n", "config: cannot be parsed"),
        (
            "[core]\n\tfsmonitor = touch \\\n{canary}\n",
            "config: line continuations are not allowed",
        ),
    ],
)
def test_config_that_cannot_be_parsed_safely_is_refused(
    clone: Path, canary: Path, text: str, problem: str
) -> None:
    _plant(clone, text.format(canary=canary), replace=True)
    assert problem in clone_problems(clone)


def test_config_includes_are_never_followed(clone: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # following the include would block forever
    _plant(clone, f"[include]\n\tpath = {fifo}\n")
    assert clone_problems(clone) == ["include.path: includes another file"]


def _write(path: Path, text: str = "x\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    ("plant", "problem"),
    [
        (lambda g: _write(g / "commondir", "../elsewhere\n"), "commondir redirects the repository"),
        (
            lambda g: _write(g / "objects/info/alternates", "/srv/objects\n"),
            "objects/info/alternates borrows objects from elsewhere",
        ),
        (
            lambda g: _write(g / "objects/info/http-alternates", "http://x\n"),
            "objects/info/http-alternates borrows objects",
        ),
        (lambda g: _write(g / "hooks/post-checkout", "#!/bin/sh\n"), "hook present: post-checkout"),
        (lambda g: _write(g / "hooks/pre-commit"), "hook present: pre-commit"),
        (lambda g: _write(g / "hooks/x.sample/y"), "hook present: a file"),
        (lambda g: _write(g / "info/attributes", "* filter=x\n"), "info/attributes present"),
        (lambda g: _write(g / "info/grafts", "a b\n"), "info/grafts rewrites history"),
        (lambda g: _write(g / "config.worktree", "[core]\n"), "config.worktree present"),
        (lambda g: _write(g / "modules/sub/config", "[core]\n"), "submodule repositories present"),
        (lambda g: _write(g / "worktrees/w/gitdir", "/x\n"), "linked worktrees present"),
        (lambda g: _write(g / "shallow", "0" * 40 + "\n"), "shallow clone (history incomplete)"),
        (
            lambda g: _write(g / "remotes/origin", "URL: ext::sh\n"),
            "remotes/ defines legacy remotes",
        ),
        (lambda g: _write(g / "branches/x", "ext::sh\n"), "branches/ defines legacy remotes"),
        (lambda g: (g / "reftable").mkdir(), "reftable ref storage present"),
        (lambda g: _write(g / "gitdir", "/x\n"), "gitdir file present"),
    ],
)
def test_dangerous_files_are_refused(clone: Path, plant: object, problem: str) -> None:
    assert callable(plant)
    plant(clone / ".git")
    assert problem in clone_problems(clone)


def test_an_empty_legacy_remotes_directory_is_harmless(clone: Path) -> None:
    (clone / ".git" / "remotes").mkdir()
    (clone / ".git" / "branches").mkdir()
    assert clone_problems(clone) == []


def test_gitdir_file_instead_of_directory_is_refused(clone: Path, tmp_path: Path) -> None:
    shutil.move(clone / ".git", tmp_path / "elsewhere.git")
    (clone / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere.git'}\n")
    assert clone_problems(clone) == [".git is a file, not a directory"]


def test_git_directory_symlink_is_refused(clone: Path, tmp_path: Path) -> None:
    shutil.move(clone / ".git", tmp_path / "elsewhere.git")
    (clone / ".git").symlink_to(tmp_path / "elsewhere.git")
    assert clone_problems(clone) == [".git is a symbolic link, not a directory"]


def test_linked_config_objects_and_refs_are_refused(clone: Path, tmp_path: Path) -> None:
    git = clone / ".git"
    for name in ("config", "objects", "refs"):
        shutil.move(git / name, tmp_path / name)
        (git / name).symlink_to(tmp_path / name)
    problems = clone_problems(clone)
    assert "config is a symbolic link, not a file" in problems
    assert "objects is a symbolic link, not a directory" in problems
    assert "refs is a symbolic link, not a directory" in problems


def test_links_and_special_files_in_git_dir_are_refused(clone: Path, tmp_path: Path) -> None:
    git = clone / ".git"
    (tmp_path / "packed").write_text("")
    (git / "packed-refs").unlink()
    (git / "packed-refs").symlink_to(tmp_path / "packed")
    os.mkfifo(git / "weird-name")
    assert clone_problems(clone) == [
        "packed-refs is a symbolic link",
        "an entry of .git is a special file",
    ]


def test_linked_hooks_directory_is_refused(clone: Path, tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    (clone / ".git" / "hooks").symlink_to(tmp_path / "hooks")
    assert clone_problems(clone) == ["hooks is a symbolic link"]


def test_config_fifo_is_refused_without_blocking(clone: Path) -> None:
    (clone / ".git" / "config").unlink()
    os.mkfifo(clone / ".git" / "config")
    assert clone_problems(clone) == ["config is a special file, not a file"]


def test_linked_objects_info_directory_is_refused(clone: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside-info"
    outside.mkdir()
    (outside / "alternates").write_text("/srv/objects\n")
    info = clone / ".git" / "objects" / "info"
    shutil.rmtree(info, ignore_errors=True)
    info.symlink_to(outside)
    assert clone_problems(clone)


def test_a_missing_clone_is_reported_not_raised(tmp_path: Path) -> None:
    assert clone_problems(tmp_path / "absent") == ["the clone directory cannot be opened"]


def test_the_clone_check_runs_no_process(
    clone: Path, canary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the clone check started a process")

    monkeypatch.setattr(proc, "run", refuse)
    monkeypatch.setattr(proc, "spawn", refuse)
    _plant(clone, f"[core]\n\tfsmonitor = touch {canary}\n")
    assert clone_problems(clone) == ["core.fsmonitor: runs a command"]


def test_real_git_lists_the_same_keys_verify_checks(clone: Path) -> None:
    """The pristine clone's keys are exactly what verify allowed (nothing hidden from it)."""
    listed = run_git(
        clone, "config", "--file", str(clone / ".git" / "config"), "--name-only", "--list"
    ).out.split()
    assert sorted(listed) == sorted(
        [
            "core.repositoryformatversion",
            "core.filemode",
            "core.bare",
            "core.logallrefupdates",
            "remote.origin.url",
            "remote.origin.fetch",
        ]
    )
