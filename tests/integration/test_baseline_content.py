"""A writer is judged by what its clone holds, not by what git reports.

Each test makes the agent's moves from inside the writer's real session container, then
checks the session guard (`lease_ready_writer`), collection and reset as an operator
would meet them: ignored files, a forged index, nested repositories, `.git` directories
git cannot hold, linked worktrees, special files, extra refs, git state, the cache.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    run_agent,
    show,
    tree_files,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp
from tests.support.repos import make_repo
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.claims.lease_ready import lease_ready_writer
from writerpool.pool.writer.baseline import writer_problems
from writerpool.runtime.hosts import open_host
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.fixture
def alias() -> str:
    return unique_alias("bas")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=6, files=4)
    write_workspaces({alias: checkout})
    return checkout


def admitted(alias: str) -> bool:
    """Whether the session guard would lease a writer of `alias` to a coding session."""
    paths = Paths.from_env()
    try:
        slot = lease_ready_writer(paths, load_config(paths), alias, None)
    except WriterpoolError as exc:
        assert exc.code == "writer_unavailable", exc
        return False
    slot.release()
    return True


def problems(name: str) -> str:
    paths = Paths.from_env()
    state = load_state(paths.writer_dir(name))
    assert state is not None
    return "; ".join(writer_problems(paths, open_host(), state, load_config(paths).config.pool))


def unexportable(report: dict[str, object]) -> list[dict[str, object]]:
    found = report["findings"]
    assert isinstance(found, list)
    return [f.get("data", {}) for f in found if f["code"] == "writer_work_unexportable"]


def append_pool_setting(line: str) -> None:
    config = Paths.from_env().config_file
    config.write_text(config.read_text() + line + "\n")  # [pool] is the file's last table


def ready(alias: str, **kwargs: str) -> str:
    writer = ready_writer(alias, **kwargs)  # type: ignore[arg-type]
    assert admitted(alias), problems(writer)  # a fresh writer is exactly its baseline
    return writer


# -- ignored files --------------------------------------------------------------------


PLANT_IGNORED = "mkdir -p .pi && printf '*\\n' > .pi/.gitignore && echo '{}' > .pi/settings.json"


def test_an_ignored_file_is_reported_and_removed_by_reset_or_the_next_lease(
    repo: Path, alias: str
) -> None:
    writer = ready(alias)
    run_agent(writer, PLANT_IGNORED)
    assert "ignored" in problems(writer)
    code, report = wp("writer", "list")
    row = next(r for r in report["data"]["writers"] if r["name"] == writer)
    assert row["atBaseline"] is False and any("ignored" in p for p in row["notAtBaseline"])
    assert row["leasable"] and row["atLease"]["leftovers"], row

    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_leftovers_present", "nothing_to_collect"]
    leftovers = report["findings"][0]
    assert leftovers["status"] == "ok" and "takes no session" not in leftovers["message"]
    assert collected(repo, writer) == {}, "ignored files are not exported"
    # Not work: reset removes them without --discard, and the writer is admitted again.
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert not (clone_of(writer) / ".pi").exists()
    assert admitted(alias)
    # Not work either for the session guard: the next lease removes them first.
    run_agent(writer, PLANT_IGNORED)
    assert admitted(alias)
    assert not (clone_of(writer) / ".pi").exists() and problems(writer) == ""


# -- a forged index -------------------------------------------------------------------

FORGE_INDEX = r"""
import hashlib, struct, subprocess
path = b"src/file-0001.txt"
old = subprocess.run(["git", "rev-parse", "HEAD:src/file-0001.txt"], capture_output=True,
                     check=True).stdout.strip().decode()
data = bytearray(open("/work/.git/index", "rb").read())
_, version, count = struct.unpack(">4sII", data[:12])
assert version == 2
pos = 12
for _ in range(count):
    length = struct.unpack(">H", data[pos + 60:pos + 62])[0] & 0xFFF
    if bytes(data[pos + 62:pos + 62 + length]) == path:
        data[pos + 40:pos + 60] = bytes.fromhex(old)  # the old blob, the new stat data
    pos += (62 + length + 8) & ~7
data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
open("/work/.git/index", "wb").write(bytes(data))
"""


def test_a_forged_index_does_not_hide_a_changed_tracked_file(repo: Path, alias: str) -> None:
    writer = ready(alias)
    status = run_agent(
        writer,
        "sed -i 's/line 1/LINE 1/' src/file-0001.txt && sleep 1.2 && git add src/file-0001.txt "
        f"&& python3 - <<'PY'\n{FORGE_INDEX}\nPY\ngit status --porcelain",
    )
    assert status.strip() == "", "the forged index must make git report a clean tree"
    assert not admitted(alias)
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_collected"], report
    wip = collected(repo, writer)["main-wip"]
    assert "LINE 1" in show(repo, f"{wip}:src/file-0001.txt")
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert "LINE 1" not in (clone_of(writer) / "src" / "file-0001.txt").read_text()
    assert admitted(alias)


# -- work git does not carry: nested repositories, .git directories, worktrees ----------


def test_a_nested_repository_makes_the_collection_incomplete_and_is_not_reset_away(
    repo: Path, alias: str
) -> None:
    writer = ready(alias)
    run_agent(
        writer,
        "mkdir sub && cd sub && git init -q && echo a > a.txt && git add a.txt "
        "&& git commit -q -m inner && echo u > uncommitted.txt",
    )
    assert not admitted(alias)
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert [(d["kind"], d["path"]) for d in unexportable(report)] == [("nested_repo", "sub")]
    assert collected(repo, writer) == {}, "nothing else changed, and sub is not exported"
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 1 and "writer_reset" not in codes(report)
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]
    assert (clone_of(writer) / "sub" / "uncommitted.txt").exists()
    code, report = wp("writer", "reset", writer, "--discard", "--apply")
    assert code == 0 and "writer_reset" in codes(report), report
    assert not (clone_of(writer) / "sub").exists() and admitted(alias)


def test_files_under_a_dot_git_directory_that_is_no_repository_are_work(
    repo: Path, alias: str
) -> None:
    writer = ready(alias)
    run_agent(writer, "mkdir -p notes/.git && echo plan > notes/.git/plan.md "
              "&& echo other > notes/other.md")  # fmt: skip
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert [(d["kind"], d["path"]) for d in unexportable(report)] == [("dot_git", "notes/.git")]
    assert "notes/other.md" in tree_files(repo, collected(repo, writer)["main-wip"])
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]
    assert (clone_of(writer) / "notes" / ".git" / "plan.md").read_text() == "plan\n"


def test_a_linked_worktree_inside_the_clone_is_work_that_blocks_cleanup(
    repo: Path, alias: str
) -> None:
    writer = ready(alias)
    run_agent(writer, "git worktree add -q -b wtb /work/wt && echo u > /work/wt/u.txt")
    assert not admitted(alias)
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert [(d["kind"], d["path"]) for d in unexportable(report)] == [("nested_repo", "wt")]
    code, report = wp("writer", "recreate", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]
    assert (clone_of(writer) / "wt" / "u.txt").exists()
    code, report = wp("writer", "reset", writer, "--discard", "--apply")
    assert code == 0 and "writer_reset" in codes(report), report
    assert not (clone_of(writer) / "wt").exists()
    assert not (clone_of(writer) / ".git" / "worktrees").exists()
    assert admitted(alias)


def test_a_ref_outside_refs_heads_that_holds_new_commits_is_work(repo: Path, alias: str) -> None:
    writer = ready(alias)
    run_agent(writer, "git checkout -q --detach && git commit -q --allow-empty -m hidden "
              "&& git update-ref refs/custom/keep HEAD && git checkout -q main")  # fmt: skip
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert [d["kind"] for d in unexportable(report)] == ["ref"]
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]
    assert (clone_of(writer) / ".git" / "refs" / "custom" / "keep").exists()


# -- leftovers that are not work: reset removes them, the guard sees them --------------

LEFTOVERS = {
    # case: (the agent's move, what the guard names, what reset must remove)
    "fifo": ("mkfifo fifo", "special file", "fifo"),
    "socket": ("python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/work/sock')\"",
               "special file", "sock"),
    "empty-directory": ("mkdir -p empty/deeper", "empty dir", "empty"),
    "extra-ref": ("git update-ref refs/custom/x HEAD", "outside refs/heads", ".git/refs/custom"),
    "rr-cache": ("mkdir -p .git/rr-cache/abc && echo x > .git/rr-cache/abc/preimage",
                 "rr-cache", ".git/rr-cache"),
    "worktree-elsewhere": ("git worktree add -q --detach /tmp/elsewhere", "worktrees",
                           ".git/worktrees"),
    "reflog": ("git checkout -q -b tmp && git checkout -q main && git branch -q -D tmp",
               "logs", ".git/logs"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LEFTOVERS))
def test_a_leftover_that_is_not_work_is_removed_before_the_next_session(
    repo: Path, alias: str, case: str
) -> None:
    move, named, gone = LEFTOVERS[case]
    writer = ready(alias)
    run_agent(writer, move)
    found = problems(writer)
    assert named in found, found
    code, report = wp("writer", "collect", writer, "--apply")
    # A worktree's gitdir file also fails the clone check (reported, collected anyway).
    assert code == 0 and "nothing_to_collect" in codes(report), report
    if "unsafe clone" in found:
        # A worktree's gitdir file fails the clone check: git state the clone check
        # refuses is left for the operator to see, and reset repairs it.
        assert not admitted(alias)
        code, report = wp("writer", "reset", writer, "--apply")
        assert code == 0 and codes(report) == ["writer_reset"], report
    # Otherwise the lease resets the clone first (as `writer reset --apply` does).
    assert admitted(alias)
    assert not os.path.lexists(clone_of(writer) / gone)
    assert problems(writer) == ""


def test_the_cache_is_cleared_by_reset_unless_the_operator_keeps_caches(
    repo: Path, alias: str
) -> None:
    writer = ready(alias, cache="uv")
    cache = Paths.from_env().writer_dir(writer) / "cache"
    plant = "mkdir -p /pi/uv/cache/wheels && echo poison > /pi/uv/cache/wheels/evil.whl"
    run_agent(writer, plant)
    assert "cache" in problems(writer)
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert cache.is_dir() and list(cache.iterdir()) == []
    run_agent(writer, plant)
    assert admitted(alias), "the lease clears the cache first"
    assert cache.is_dir() and list(cache.iterdir()) == []

    append_pool_setting("keep_caches = true")
    run_agent(writer, plant)
    assert admitted(alias), "a kept cache is the operator's choice"
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert (cache / "cache" / "wheels" / "evil.whl").read_text() == "poison\n"


# -- caps on what a collection imports -------------------------------------------------


def test_a_sparse_file_above_the_cap_is_named_and_never_read(repo: Path, alias: str) -> None:
    writer = ready(alias)
    run_agent(writer, "truncate -s 3G big.bin && echo small > small.txt")
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert unexportable(report) == [{"kind": "too_large", "path": "big.bin", "size": 3 << 30}]
    files = tree_files(repo, collected(repo, writer)["main-wip"])
    assert "small.txt" in files and "big.bin" not in files
    objects = sum(p.stat().st_size for p in (repo / ".git" / "objects").rglob("*") if p.is_file())
    assert objects < 50 << 20, "no large blob reached the operator's object store"
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]


def test_the_caps_are_configurable_and_an_unreadable_file_is_named(repo: Path, alias: str) -> None:
    append_pool_setting("collect_max_total_bytes = 1000")
    writer = ready(alias)
    run_agent(writer, "head -c 600 /dev/zero > a.bin && head -c 600 /dev/zero > b.bin "
              "&& echo s > secret.txt && chmod 000 secret.txt")  # fmt: skip
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and "writer_collect_incomplete" in codes(report), report
    assert sorted((d["kind"], d["path"]) for d in unexportable(report)) == [
        ("over_total", "b.bin"),
        ("unreadable", "secret.txt"),
    ]
    assert "a.bin" in tree_files(repo, collected(repo, writer)["main-wip"])


# -- removal and re-provisioning -------------------------------------------------------

HOSTILE_TREE = r"""
mkdir -p locked/a/b && touch locked/a/b/f && chmod 555 locked/a/b locked/a locked
mkdir -p shut && touch shut/f && chmod 000 shut
mkfifo pipe
python3 - <<'PY'
import os
fd = os.open("/work", os.O_RDONLY)
for name in ["deep"] + ["d"] * 1500 + ["L" * 250] * 20:
    os.mkdir(name, dir_fd=fd)
    nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nxt
os.close(os.open(b"\xff\xfe-not-utf8", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
PY
"""


def test_recreate_and_remove_handle_any_tree_the_agent_can_make(repo: Path, alias: str) -> None:
    writer = ready(alias)
    run_agent(writer, HOSTILE_TREE)
    code, report = wp("writer", "recreate", writer, "--discard", "--apply")
    assert code == 0 and "writer_recreated" in codes(report), report
    assert not (clone_of(writer) / "deep").exists() and admitted(alias)
    run_agent(writer, HOSTILE_TREE)
    code, report = wp("writer", "remove", writer, "--discard", "--apply")
    assert code == 0 and "writer_removed" in codes(report), report
    assert os.listdir(Paths.from_env().writer_dir(writer)) == ["lease"]


def test_a_removed_writer_is_not_counted_as_surplus_again(repo: Path, alias: str) -> None:
    ready_writer(alias, writers=2)
    args = ["mode", "set", alias, "container", "--profiles", "code", "--network", "none"]
    code, report = wp(*args, "--writers", "1", "--apply")
    assert code == 0 and f"writer/{alias}/{alias}-w2" in {
        f["target"] for f in report["findings"] if f["code"] == "writer_removed"
    }, report
    code, report = wp(*args, "--writers", "1", "--apply")
    assert code == 0, report
    assert not [f for f in report["findings"] if f["target"].endswith(f"{alias}-w2")], report


@pytest.mark.parametrize("damage", ["missing", "dangling-link"])
def test_a_clone_without_usable_state_is_never_overwritten(
    repo: Path, alias: str, damage: str
) -> None:
    writer = ready(alias)
    run_agent(writer, "git checkout -q -b precious && git commit -q --allow-empty -m keep")
    state = Paths.from_env().writer_dir(writer) / "state.json"
    state.unlink()
    if damage == "dangling-link":
        state.symlink_to("/nonexistent/state.json")
    # A link in place of the state file is refused when read (it is never followed).
    refusal = "writer_state_missing" if damage == "missing" else "writer_state_unreadable"
    args = ["mode", "set", alias, "container", "--profiles", "code", "--network", "none"]
    code, report = wp(*args, "--apply")
    assert code == 1 and refusal in codes(report), report
    assert (clone_of(writer) / ".git" / "refs" / "heads" / "precious").exists()
    code, report = wp("writer", "remove", writer, "--apply")
    removal = "writer_state_missing" if damage == "missing" else "writer_uncollected"
    assert code == 1 and codes(report) == [removal]
    assert clone_of(writer).exists()
    code, report = wp("writer", "remove", writer, "--discard", "--apply")
    assert code == 0 and "writer_removed" in codes(report), report
