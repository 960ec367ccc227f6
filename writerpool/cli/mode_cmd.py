"""`writerpool mode set ALIAS [MODE] [options]`."""

from __future__ import annotations

from typing import Any

import click

from writerpool.cli.output import emit, json_option, terminal_steps
from writerpool.config.allow_entry import split_words
from writerpool.config.models import load_config
from writerpool.config.modes import parse_warm
from writerpool.config.network import DEFAULT_NETWORK, NETWORK_CHOICES
from writerpool.config.paths import Paths
from writerpool.errors import UsageError
from writerpool.pool.images.derive import image_setting, require_cache_tool
from writerpool.pool.modes.change import set_mode
from writerpool.pool.modes.request import ModeRequest
from writerpool.pool.modes.show import show_modes
from writerpool.runtime.hosts import open_host

CONTAINER_OPTIONS = (
    "profiles",
    "writers",
    "lifecycle",
    "image",
    "network",
    "tags",
    "cache",
    "base",
    "allow",
)


@click.group()
def mode() -> None:
    """Choose how a workspace runs coding sessions."""


@mode.command("show")
@click.argument("alias", required=False)
@json_option
def show_cmd(alias: str | None, as_json: bool) -> None:
    """The stored intent of each workspace and the `mode set` command that reproduces it."""
    paths = Paths.from_env()
    config = load_config(paths).config
    agents = {name: profile.agent for name, profile in config.profiles.items()}
    emit(show_modes(paths, sorted(config.workspaces), alias, agents), as_json)


@mode.command("set")
@click.argument("alias")
@click.argument(
    "mode_name",
    metavar="[MODE]",
    required=False,
    type=click.Choice(["host", "container", "read-only"]),
)
@click.option("--accept-host-writes", is_flag=True, help="Required for host mode.")
@click.option("--profiles", help="Comma-separated coding profiles (container mode).")
@click.option("--writers", type=click.IntRange(1, 16), help="Number of writers, 1-16 (default 1).")
@click.option("--lifecycle", type=click.Choice(["persistent", "ephemeral"]))
@click.option(
    "--image",
    help="'default' (the built image's pin), a name given to `image derive`, "
    "or a 64-hex local image id.",
)
@click.option(
    "--network",
    type=click.Choice(NETWORK_CHOICES),
    help="provider (default: only the profile's provider, through writerpool's proxy), "
    "none, or a user-mode network that is NOT limited (slirp4netns, pasta).",
)
@click.option("--tags", type=click.Choice(["none", "reachable"]))
@click.option(
    "--cache",
    type=click.Choice(["none", "go", "uv"]),
    help="A writer-private cache for go or uv; the image must carry that tool.",
)
@click.option("--base", help="A named local or remote branch to provision writers from.")
@click.option(
    "--allow",
    help="Hosts the agent may reach through the allowlist proxy (provider network): "
    "host, *.domain, host:port, http://host, an address range, or a set name; "
    "comma-separated.",
)
@click.option(
    "--warm",
    help="Writers the pool service keeps started and idle for a claim (default 0): a "
    "count spread over the hosts writers are placed on, or HOST=N,… per host.",
)
@click.option(
    "--hosts",
    help="Comma-separated hosts to place writers on, round robin in this order: "
    "`local` and names of [hosts.NAME] tables (default: local).",
)
@click.option("--discard", is_flag=True, help="Allow losing surplus writers' uncollected work.")
@click.option("--apply", is_flag=True, help="Make the change (default: plan only).")
@json_option
def set_cmd(
    alias: str,
    mode_name: str | None,
    accept_host_writes: bool,
    discard: bool,
    apply: bool,
    as_json: bool,
    **given: Any,  # the container options, None where not given
) -> None:
    """Plan (or with --apply, make) a workspace's execution mode."""
    paths = Paths.from_env()
    image, cache = given["image"], given["cache"]
    if image is not None:
        image = image_setting(paths, image)  # a derived image's name becomes its ID
    if cache is not None and mode_name in (None, "container"):
        require_cache_tool(paths, image or "default", cache)
    try:
        warm_total, warm_hosts = parse_warm(given["warm"] or "0")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    req = ModeRequest(
        alias=alias,
        mode=mode_name,
        accept_host_writes=accept_host_writes,
        profiles=tuple(p for p in (given["profiles"] or "").split(",") if p),
        writers=given["writers"] or 1,
        lifecycle=given["lifecycle"] or "persistent",
        image=image or "default",
        network=given["network"] or DEFAULT_NETWORK,
        tags=given["tags"] or "none",
        cache=cache or "none",
        base=given["base"],
        allow=split_words(given["allow"] or ""),
        warm=warm_total,
        warm_hosts=tuple(warm_hosts.items()) if warm_hosts is not None else None,
        hosts=split_words(given["hosts"] or ""),
        discard=discard,
        apply=apply,
        container_options_given=any(v is not None for v in given.values()),
    )
    report = set_mode(paths, open_host(), load_config(paths), req, terminal_steps)
    emit(report, as_json)
