"""Removing a writer's files: any tree an agent can make, and the state file last."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.pool.provision import reconcile as writers
from writerpool.runtime import local
from writerpool.runtime.host import writer_at
from writerpool.runtime.hosts import open_host
from writerpool.runtime.local import LocalPodman
from writerpool.tree_removal import remove_path


def _hostile_tree(top: Path) -> None:
    """What an agent can leave: depth beyond Python's recursion limit, names longer
    than PATH_MAX in total, bytes that are not UTF-8, special files, read-only and
    unreadable directories, and a link to a file that must survive."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    for name in ["deep"] + ["d"] * 1500 + ["L" * 250] * 20:
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(os.open(b"\xff\xfe-not-utf8", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.mkfifo("fifo", dir_fd=fd)
    os.chmod(fd, 0o500)
    os.close(fd)
    (top / "locked" / "a").mkdir(parents=True)
    (top / "locked" / "a" / "f").write_text("x")
    for sub in ("locked/a", "locked"):
        (top / sub).chmod(0o555)
    (top / "shut").mkdir()
    (top / "shut" / "f").write_text("x")
    (top / "shut").chmod(0o000)
    here = os.getcwd()
    os.chdir(top)  # a Unix socket's path is limited to 108 bytes: bind it relative
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock")
    finally:
        os.chdir(here)


def test_remove_path_removes_any_tree_and_follows_no_link(tmp_path: Path) -> None:
    keep = tmp_path / "outside.txt"
    keep.write_text("keep")
    tree = tmp_path / "tree"
    _hostile_tree(tree)
    (tree / "link").symlink_to(keep)
    (tree / "dirlink").symlink_to(tmp_path)
    remove_path(tree)
    assert not os.path.lexists(tree)
    assert keep.read_text() == "keep"


def _writer(tmp_path: Path) -> tuple[Paths, str]:
    paths = Paths.from_env()
    name = "demo-w1"
    root = paths.writer_dir(name)
    _hostile_tree(root / "clone")
    (root / "agent").mkdir()
    (root / "state.json").write_text("{}")
    (root / "lease").write_text("")
    return paths, name


def test_delete_writer_files_leaves_only_the_lease(tmp_path: Path) -> None:
    paths, name = _writer(tmp_path)
    writers.delete_writer_files(paths, open_host(), name)
    assert os.listdir(paths.writer_dir(name)) == ["lease"]


def test_a_failed_removal_keeps_the_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, name = _writer(tmp_path)

    def fail(path: Path) -> None:
        raise PermissionError(13, "denied")

    monkeypatch.setattr(local, "remove_path", fail)  # the local host's storage removal
    with pytest.raises(OSError):
        writers.delete_writer_files(paths, open_host(), name)
    assert (paths.writer_dir(name) / "state.json").exists(), "state goes last"
    # pytest's own clean-up of tmp_path recurses and cannot remove a tree this deep.
    remove_path(paths.writer_dir(name))


def test_the_local_host_creates_and_removes_only_a_writers_storage(tmp_path: Path) -> None:
    paths = Paths.from_env()
    host = LocalPodman()
    writer = writer_at(paths, "demo-w2", host.name)
    clone, agent, cache = (host.storage_path(writer, p) for p in ("clone", "agent", "cache"))
    assert clone.parent == writer.record.path == paths.writer_dir("demo-w2")
    assert agent == writer.record.rendered_agent  # rendered in place: what containers mount
    host.create_storage(writer, cache=True, adopt=False)
    for path in (writer.record.path, clone, agent, cache):
        assert path.is_dir() and path.stat().st_mode & 0o777 == 0o700
    # Empty: provisioning's container clones into it (pool/provision/stream.py).
    assert list(clone.iterdir()) == []
    mount = host.storage_mount(writer, "clone", "/work", read_only=True)
    assert mount.argv() == ["--mount", f"type=bind,src={clone},dst=/work,ro=true"]
    inside = host.storage_mount(writer, "clone", "/work/.git", sub_path=".git")
    assert inside.argv() == ["--mount", f"type=bind,src={clone / '.git'},dst=/work/.git"]
    for part, sub_path in (("state.json", ""), ("collections", ""), ("clone", "../agent")):
        with pytest.raises(ValueError):
            host.storage_mount(writer, part, "/work", sub_path=sub_path)
    _hostile_tree(clone)
    _hostile_tree(writer.record.path / "clone.new")  # left by an earlier provisioning
    writer.record.state_file.write_text("{}")
    writer.record.lease_file.write_text("")
    writer.record.egress.mkdir()
    writer.record.collections.mkdir()
    host.remove_storage(writer)
    # The controller's record (state, lease, the proxy sockets, the bundles) stays.
    assert sorted(os.listdir(writer.record.path)) == [
        "collections",
        "egress",
        "lease",
        "state.json",
    ]
    host.remove_storage(writer)  # nothing left to remove is no error
