"""The writerpool command line: parse, call a service, render a Report."""

from __future__ import annotations

import importlib
import sys
import traceback

import click

from writerpool import __version__
from writerpool.errors import WriterpoolError
from writerpool.report import Report, sanitize

# Each command's module is imported only when that command runs: `writerpool serve`
# answers a client's `initialize` without loading Podman, doctor or the pool code.
COMMANDS = {
    "config": "writerpool.cli.config_cmd:config",
    "doctor": "writerpool.cli.doctor_cmd:doctor",
    "image": "writerpool.cli.image_cmd:image",
    "serve": "writerpool.cli.serve_cmd:serve",
    "control": "writerpool.cli.control_cmd:control",
    "mode": "writerpool.cli.mode_cmd:mode",
    "writer": "writerpool.cli.writer_cmd:writer",
    "register": "writerpool.cli.register_cmd:register",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's documented pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="writerpool")
def cli() -> None:
    """Contained writers for coding agents."""


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
