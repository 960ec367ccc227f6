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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="writerpool")
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
