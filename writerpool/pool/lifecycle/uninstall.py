"""`writerpool uninstall [--discard] [--keep-images] [--apply]`: plan (default), or remove,
what writerpool made for this account.

Removed: every writer (refused, and nothing at all removed, while one holds work no
complete collection covers, unless --discard), the client registrations writerpool's
ownership record proves it added, the images it built (recorded by ID, never an image
built on them), the state directory (pin, control, collections) and the cache directory
(pi, image build cache), and execution-modes.json.
Kept: config.toml (the operator wrote it), the audit log, and the review refs already
collected into the checkouts (`refs/remotes/writer-*`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.images.prune import (
    NO_RECORD,
    NO_RECORD_REMEDY,
    built_here,
    owned_images,
    remove_owned,
)
from writerpool.pool.lifecycle.actions import guard
from writerpool.pool.provision.listing import writer_names
from writerpool.pool.provision.reconcile import delete_writer_files, operate
from writerpool.pool.provision.writer_host import host_name
from writerpool.pool.writer.lease import LeaseBatch, leased_all
from writerpool.report import Report
from writerpool.runtime.host import WriterHost
from writerpool.runtime.hosts import WriterHosts
from writerpool.state.writer import load_state

TARGET = "writerpool"
# Removes, or plans to remove, what writerpool added outside its own directories (the
# clients' registrations, clients/uninstall.py); it runs before the state directory,
# which holds the record of them, goes. The caller passes it: the pool is below clients.
Registrations = Callable[[Paths, bool, Report], None]


def _writers_may_go(paths: Paths, hosts: WriterHosts, loaded: LoadedConfig,
                    flags: tuple[bool, bool], report: Report,
                    leases: LeaseBatch) -> bool:  # fmt: skip
    """Whether every writer may be deleted (the uncollected-work guard of each, on its
    own host: one that cannot be reached cannot be judged, and refuses)."""
    discard, apply = flags
    ok = True
    for alias, name in writer_names(paths):
        try:
            host = hosts.get(host_name(paths, name))
            with operate(paths, host, 0, name, leases):
                state = load_state(paths.writer_dir(name))
                if state is not None and not guard(
                    paths, host, loaded, state, discard, report, apply
                ):
                    ok = False
        except WriterpoolError as exc:
            report.add(exc.code, "error", f"writer/{alias}/{name}", exc.message)
            ok = False
    return ok


def _images(paths: Paths, apply: bool, report: Report) -> None:
    """The images this install built (recorded by ID), never others built on them nor
    the ones its builds found and reused."""
    recorded = owned_images(paths)
    if recorded is None:
        report.add("image_record_missing", "warning", "image/writer",
                   NO_RECORD.format(file="images.json", what="uninstall"),
                   remedy=NO_RECORD_REMEDY)  # fmt: skip
        return
    owned = built_here(recorded)
    if apply:
        remove_owned(paths, owned, report)
        return
    for image in owned:
        report.add("uninstall_planned", "planned", "image/writer",
                   f"would remove {image.describe()}")  # fmt: skip


def _remove_tree(path: Path, label: str, apply: bool, report: Report) -> None:
    if not path.exists():
        return
    if not apply:
        report.add("uninstall_planned", "planned", TARGET, f"would remove the {label}")
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    report.add("uninstall_removed", "ok", TARGET, f"removed the {label}")


def uninstall(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, discard: bool, keep_images: bool,
    apply: bool, registrations: Registrations,
) -> Report:  # fmt: skip
    report = Report("uninstall")
    names = [name for _, name in writer_names(paths)]
    # Every writer's lease with one wait, held from the guard to the removal; each
    # writer is judged and removed on its own host.
    with (
        WriterHosts(loaded.config.hosts, host) as hosts,
        leased_all(paths.writer_dir, names, loaded.config.pool.lease_wait_seconds) as leases,
    ):
        flags = (discard, keep_images, apply)
        _uninstall(paths, hosts, loaded, flags, report, leases, registrations)
    return report


def _uninstall(
    paths: Paths, hosts: WriterHosts, loaded: LoadedConfig, flags: tuple[bool, bool, bool],
    report: Report, leases: LeaseBatch, registrations: Registrations,
) -> None:  # fmt: skip
    discard, keep_images, apply = flags
    if not _writers_may_go(paths, hosts, loaded, (discard, apply), report, leases):
        report.add(
            "uninstall_refused",
            "error",
            TARGET,
            "a writer holds work no complete collection covers; nothing was removed",
            remedy="collect or finish each writer named above, or pass --discard",
        )
        return
    for alias, name in writer_names(paths):
        if not apply:
            report.add("uninstall_planned", "planned", f"writer/{alias}/{name}",
                       "would remove the writer (state, clone, bundles)")  # fmt: skip
            continue
        host = hosts.get(host_name(paths, name))
        with operate(paths, host, 0, name, leases):
            delete_writer_files(paths, host, name)
        report.add("writer_removed", "ok", f"writer/{alias}/{name}", "writer removed")
    registrations(paths, apply, report)
    if not keep_images:
        _images(paths, apply, report)
    _remove_tree(paths.modes_file, "stored execution modes", apply, report)
    _remove_tree(paths.cache_dir, "cache directory (pi, image build cache)", apply, report)
    # Last: it holds the leases, the pin and the ownership record used above. The audit
    # log stays: this command's own line is written to it after the command.
    if paths.state_dir.is_dir():
        for child in sorted(paths.state_dir.iterdir()):
            if not child.name.startswith(paths.audit_log.name):
                _remove_tree(child, f"state {child.name}", apply, report)
    report.add(
        "uninstall_kept",
        "ok",
        TARGET,
        "kept: the configuration file, the audit log and review refs already collected "
        "into checkouts",
    )
