"""`writerpool uninstall`: plan by default; --apply removes what writerpool made."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.clients.uninstall import remove_registrations
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.lifecycle.uninstall import uninstall
from writerpool.runtime.hosts import open_host


@click.command("uninstall")
@click.option("--discard", is_flag=True, help="Allow losing writers' uncollected work.")
@click.option("--keep-images", is_flag=True, help="Leave the writer images in Podman's storage.")
@click.option("--apply", is_flag=True, help="Remove it all; without this, only plan.")
@json_option
def uninstall_cmd(discard: bool, keep_images: bool, apply: bool, as_json: bool) -> None:
    """Remove writers, registrations, images, state and caches (config.toml is kept)."""
    paths = Paths.from_env()
    report = uninstall(
        paths, open_host(), load_config(paths), discard, keep_images, apply, remove_registrations
    )
    emit(report, as_json)
