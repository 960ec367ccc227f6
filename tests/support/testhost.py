"""The test host (scripts/testhost) as tests set it up: its `[hosts.th]` table in the
test's configuration, and a writer provisioned there on the pinned image."""

from __future__ import annotations

import json
import os
from pathlib import Path

from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.modes import ContainerSettings
from writerpool.config.paths import Paths
from writerpool.gitops.base import resolve_base
from writerpool.pool.provision.make import provision
from writerpool.report import Report
from writerpool.runtime.image_transfer import transfer_image
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.remote import RemotePodman
from writerpool.state.writer import WriterState


def add_host(host: HostConfig, url: str | None = None, config: Path | None = None) -> None:
    """Append `[hosts.th]` naming `host` (reached at `url` when given: a closed port) to
    `config`, by default the test's configuration file."""
    with (config or Path(os.environ["WRITERPOOL_CONFIG"])).open("a") as out:
        out.write(f'\n[hosts.th]\nurl = "{url or host.url}"\nidentity = "{host.identity}"\n'
                  f'known_hosts = "{host.known_hosts}"\n')  # fmt: skip


def send_image(remote: RemotePodman, image_pin: Path) -> str:
    """The pinned writer image on the host (transferred unless there); its ID."""
    pinned = str(json.loads(image_pin.read_text())["imageId"])
    transfer_image(LocalPodman(), remote, pinned, lambda sent, total: None)
    return pinned


def provision_there(
    remote: RemotePodman, paths: Paths, alias: str, name: str, repo: Path, image_pin: Path
) -> WriterState:
    """Writer `name` of workspace `alias` provisioned on the host (network none), with
    the pinned image sent there first; not accepted."""
    send_image(remote, image_pin)
    settings = ContainerSettings(profiles=("code",), base="main", network="none")
    return provision(paths, remote, alias, name, repo, settings, resolve_base(repo, "main"),
                     Report("test"), Pool())  # fmt: skip
