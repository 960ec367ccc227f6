"""`writerpool image build|derive|show|prune`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from writerpool.agent import native
from writerpool.agent.compile_cache import make_compile_cache
from writerpool.agent.install import PI_VERSION, install_pi, pi_installed, reach_problem
from writerpool.cli.output import emit, json_option
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.images.derive import derive_image, derive_source
from writerpool.pool.images.prune import images_in_use, prune_images
from writerpool.report import Report
from writerpool.runtime.image import LABEL_INPUTS, inspect_image, load_definition, load_pin
from writerpool.runtime.image_build import PiSource, Progress, build_image
from writerpool.runtime.image_transfer import prune_host, transfer_to_host

TARGET = "image/writer"


@click.group()
def image() -> None:
    """Build and inspect the writer image."""


@image.command("build")
@click.option("--force", is_flag=True, help="Rebuild from scratch: new root file system too.")
@click.option("--mirror", metavar="URL", help="Debian mirror for this build.")
@json_option
def build(force: bool, mirror: str | None, as_json: bool) -> None:
    """Build the writer image without any container registry and pin it."""
    paths = Paths.from_env()
    definition = load_definition(PI_VERSION, mirror=mirror, agents=native.pins_text())

    def pi_prefix() -> Path:
        install_pi(paths.pi_prefix)
        make_compile_cache(paths.pi_prefix)  # the image copies it beside pi
        return paths.pi_prefix

    def agents(context: Path) -> Path:
        native.install(paths.agents_prefix)
        return native.stage(paths.agents_prefix, context)

    def installed() -> bool:
        return pi_installed(paths.pi_prefix) and native.installed(paths.agents_prefix)

    pi = PiSource(installed, reach_problem, pi_prefix, agents)
    progress = Progress(sys.stderr, verbose=sys.stderr.isatty())
    outcome = build_image(paths, definition, pi, progress, force=force)
    report = Report(
        "image build",
        data={
            "imageId": outcome.image_id,
            "inputsDigest": outcome.inputs_digest,
            "tag": outcome.tag,
            "reused": outcome.reused,
            "rootfs": outcome.rootfs,
            "seconds": outcome.seconds,
        },
    )
    short = outcome.image_id[:12]
    if outcome.reused:
        report.add("image_reused", "ok", TARGET, f"reused {short} (same inputs); pinned")
    else:
        report.add("image_built", "ok", TARGET, f"built {short} in {outcome.seconds:.0f} s; pinned")
    emit(report, as_json)


@image.command("derive")
@click.argument("name")
@click.option(
    "--containerfile",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="A Containerfile; its first FROM becomes the pinned writer image.",
)
@click.option(
    "--context",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="The Containerfile's build context (default: its folder).",
)
@click.option(
    "--requirements",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="A pip requirements or lock file; wheels are fetched by the host's pip.",
)
@json_option
def derive(name: str, containerfile: Path | None, context: Path | None,
           requirements: Path | None, as_json: bool) -> None:  # fmt: skip
    """Build image NAME from the pinned writer image, with no network in the build."""
    paths = Paths.from_env()
    source = derive_source(containerfile, context, requirements)
    progress = Progress(sys.stderr, verbose=sys.stderr.isatty())
    emit(derive_image(paths, name, source, progress), as_json)


@image.command("prune")
@click.option("--apply", is_flag=True, help="Remove them; without this, only plan.")
@click.option("--host", "host", metavar="NAME", help="Prune on the configured host NAME.")
@json_option
def prune(apply: bool, host: str | None, as_json: bool) -> None:
    """Plan (or remove) writer images that no pin, mode or writer uses."""
    paths = Paths.from_env()
    if host:
        emit(prune_host(paths, host, images_in_use(paths), apply), as_json)
    else:
        emit(prune_images(paths, apply), as_json)


@image.command("transfer")
@click.option("--host", "host", metavar="NAME", required=True, help="A [hosts.NAME] table.")
@json_option
def transfer(host: str, as_json: bool) -> None:
    """Copy the pinned writer image to a host over its SSH connection, verified by ID."""

    def say(line: str) -> None:
        click.echo(line, err=True)

    emit(transfer_to_host(Paths.from_env(), host, say), as_json)


@image.command("show")
@json_option
def show(as_json: bool) -> None:
    """Show the pinned writer image and whether it exists locally."""
    paths = Paths.from_env()
    report = Report("image show")
    pin = load_pin(paths)
    if pin is None:
        report.add("image_unavailable", "error", TARGET, "no writer image is pinned",
                   remedy="run `writerpool image build`")  # fmt: skip
        emit(report, as_json)
        return
    try:
        current: str | None = load_definition(PI_VERSION, agents=native.pins_text()).inputs_digest()
    except WriterpoolError:  # no images/ beside this installation: nothing to compare with
        current = None
    info = inspect_image(pin.image_id)
    carried = native.image_versions((info.labels or {}) if info is not None else {})
    report.data.update(
        imageId=pin.image_id,
        inputsDigest=pin.inputs_digest,
        writerpoolVersion=pin.writerpool_version,
        exists=info is not None,
        currentInputsDigest=current,
        agents=carried,
    )
    short = pin.image_id[:12]
    if info is None:
        report.add("image_unavailable", "error", TARGET,
                   f"the pinned image {short} is not in local storage",
                   remedy="run `writerpool image build`")  # fmt: skip
    elif current is not None and info.label(LABEL_INPUTS) != current:
        report.add("image_outdated", "warning", TARGET,
                   f"the pinned image {short} was built from other inputs than images/ holds now",
                   remedy="run `writerpool image build`")  # fmt: skip
    else:
        agents = ", ".join(f"{name} {version}" for name, version in carried.items())
        found = f"pinned image {short} exists locally ({agents or 'agents unlabelled'})"
        report.add("image_pinned", "ok", TARGET, found)
    emit(report, as_json)
