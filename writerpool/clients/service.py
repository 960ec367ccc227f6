"""`writerpool register TARGET`: plan, apply or remove writerpool's one server
registration in a client, through the client's own CLI, with an ownership record
(`--verify`: clients/verify.py). Either transport: the `serve` command line (stdio), or
with `--http` the pool service's URL (clients/http.py).

Rules, for both transports alike: the record is written before the client is asked; a
registration named `writerpool` that differs from what writerpool would write is
reported `registration_divergent` and never replaced or removed; `--remove` removes only
what the ownership record proves writerpool added, still unchanged, and otherwise
refuses with `ownership_unavailable`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from writerpool.atomic import ensure_private_dir
from writerpool.audit import audit
from writerpool.clients import codex_config, http
from writerpool.clients.adapters import ClientAdapter, Observed, adapter_for
from writerpool.clients.model import SERVER_NAME, Registration, Target
from writerpool.clients.ownership import (
    OwnedRegistration,
    OwnershipRecord,
    clients_dir,
    entry_for,
    load_record,
    locked,
    store_record,
)
from writerpool.clients.registration import desired_registration
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.report import Report
from writerpool.state.service_record import expected_url

Action = Literal["plan", "apply", "verify", "remove"]
# Starts the pool service unless it runs: its report carries the URL (`url`), or why it
# could not start. The service sits above the clients: `register --http --apply` passes
# its start in.
StartService = Callable[[Paths], Report]


@dataclass(frozen=True)
class Ctx:
    paths: Paths
    target: Target
    adapter: ClientAdapter
    wanted: Registration
    report: Report

    @property
    def where(self) -> str:
        return self.target.report_target

    @property
    def label(self) -> str:
        return f"{self.adapter.cli.label} ({self.target.scope} scope)"

    def cwd(self) -> Path:
        """Claude Code reads project and local scopes from its working directory; every
        other call runs in an empty private directory, so no project's entries apply."""
        if self.target.project is not None:
            return self.target.project
        return ensure_private_dir(clients_dir(self.paths) / "neutral")

    def read(self) -> Observed | None:
        return self.adapter.read(self.target, self.cwd())

    def matches(self, observed: Observed | None, wanted: Registration) -> bool:
        return (
            observed is not None
            and observed.scope == self.target.scope
            and observed.registration is not None
            and self.adapter.same(observed.registration, wanted)
        )

    def problems(self, observed: Observed | None) -> list[str]:
        """What the matching registration lacks for the client to use it (its settings)."""
        if observed is None or observed.registration is None:
            return []
        return self.adapter.problems(observed.registration, self.wanted)

    def settings_data(self) -> dict[str, Any]:
        return {"settings": dict(self.wanted.settings)} if self.wanted.settings else {}

    def command_data(self, args: list[str]) -> dict[str, Any]:
        """The exact client command line (the operator asked to see it: it holds paths),
        and what goes on its standard input (no secret either)."""
        data: dict[str, Any] = {"argv": self.adapter.cli.argv(args)}
        stdin = self.adapter.add_stdin(self.wanted) if args == self.add_args() else None
        if stdin is not None:
            data["stdin"] = stdin.decode()
        if self.target.project is not None:
            data["cwd"] = str(self.target.project)
        if self.wanted.url is not None:
            data["url"] = self.wanted.url
        return data

    def add_args(self) -> list[str]:
        return self.adapter.add_args(self.target, self.wanted)


def context(
    paths: Paths,
    target: Target,
    adapter: ClientAdapter | None,
    command: str,
    wanted: Registration | None = None,
    report: Report | None = None,
) -> Ctx:
    """`wanted`: the registration to compare with; the stdio one unless given."""
    if report is None:
        report = Report(command)
        report.data["target"] = target.name
        report.data["name"] = SERVER_NAME
    if wanted is None:
        wanted = desired_registration(paths, target.client, target.approve_prompts)
    return Ctx(paths, target, adapter or adapter_for(target), wanted, report)


def divergent(ctx: Ctx, observed: Observed, status: Literal["warning", "error"]) -> None:
    if observed.scope != ctx.target.scope:
        what = f"a registration named {SERVER_NAME} in the {observed.scope} scope shows first"
    elif observed.registration is None or observed.registration.kind != ctx.wanted.kind:
        what = f"a {observed.kind} server named {SERVER_NAME} is registered"
    elif ctx.wanted.kind == "http":
        what = f"{SERVER_NAME} is registered with another URL"
    else:
        what = f"{SERVER_NAME} is registered with another command or environment"
    remedy = f"inspect it with the client's `mcp get {SERVER_NAME}`; remove it there if unwanted"
    owned = load_record(ctx.paths).find(ctx.target)
    if owned is not None and ctx.matches(observed, owned.registration()):
        remedy = (
            f"it is writerpool's: `writerpool register {ctx.target.name} --remove`, then --apply"
        )
    ctx.report.add(
        "registration_divergent", status, ctx.where, f"{what}; writerpool leaves it alone",
        remedy=remedy,
    )  # fmt: skip


def http_wanted(paths: Paths, target: Target) -> Registration:
    """The pool service's registration at its URL now (or the one it will choose)."""
    return http.desired(paths, target, expected_url(paths) or http.UNCHOSEN_URL)


def plan(
    paths: Paths, target: Target, adapter: ClientAdapter | None = None, over_http: bool = False
) -> Report:
    """Say what --apply would run; change nothing in the client."""
    command = f"register {target.name}" + (" --http" if over_http else "")
    wanted = http_wanted(paths, target) if over_http else None
    ctx = context(paths, target, adapter, command, wanted)
    cli = ctx.adapter.cli
    observed = ctx.read() if cli.path is not None else None
    if observed is None:
        what = f"would add {SERVER_NAME} to {ctx.label}"
        if over_http:
            what = http.describe_plan(target, str(ctx.wanted.url), ctx.label)
        ctx.report.add(
            "registration_planned",
            "planned",
            ctx.where,
            what,
            **ctx.command_data(ctx.add_args()),
            **ctx.settings_data(),
        )
    elif ctx.matches(observed, ctx.wanted) and ctx.problems(observed):
        ctx.report.add(
            "registration_planned",
            "planned",
            ctx.where,
            f"would set {SERVER_NAME}'s settings in {ctx.label}: "
            + "; ".join(ctx.problems(observed)),
            **ctx.settings_data(),
        )
    elif ctx.matches(observed, ctx.wanted):
        unchanged(ctx, load_record(paths).find(target))
    else:
        divergent(ctx, observed, "warning")
    if cli.path is None:
        ctx.report.add(
            "client_unavailable",
            "error",
            ctx.where,
            f"{cli.label}'s `{cli.program}` command is not on PATH; nothing was read",
            remedy=f"install {cli.label} or put `{cli.program}` on PATH",
        )
    if over_http:
        http.exposure(ctx.report, ctx.where, str(ctx.wanted.url))
    codex_config.prompt_approval(ctx.report, ctx.where, ctx.target)
    return ctx.report


def unchanged(ctx: Ctx, owned: OwnedRegistration | None) -> None:
    mine = owned is not None and ctx.adapter.same(owned.registration(), ctx.wanted)
    note = "" if mine else " (not added by writerpool: --remove leaves it)"
    ctx.report.add(
        "registration_unchanged",
        "ok",
        ctx.where,
        f"{ctx.label} already has {SERVER_NAME} as writerpool would write it{note}",
        owned=mine,
    )


def apply(
    paths: Paths,
    target: Target,
    adapter: ClientAdapter | None = None,
    start_service: StartService | None = None,
) -> Report:
    """Add the registration through the client's CLI, unless one of that name exists.
    With `start_service`, the pool service's URL: the service is started first."""
    over_http = start_service is not None
    command = f"register {target.name}" + (" --http" if over_http else "") + " --apply"
    wanted = None
    if start_service is not None:
        (adapter or adapter_for(target)).cli.require()
        started = start_service(paths)
        if started.has_error():
            started.command = command
            return started
        wanted = http.desired(paths, target, str(started.data["url"]))
    ctx = context(paths, target, adapter, command, wanted)
    ctx.adapter.cli.require()
    with locked(paths):
        record = load_record(paths)
        owned = record.find(target)
        observed = ctx.read()
        mine = owned is not None and ctx.adapter.same(owned.registration(), ctx.wanted)
        if ctx.matches(observed, ctx.wanted) and ctx.problems(observed) and mine:
            _configure(ctx, record)
        elif ctx.matches(observed, ctx.wanted) and ctx.problems(observed):
            ctx.report.add(
                "registration_divergent",
                "error",
                ctx.where,
                f"{SERVER_NAME} is registered but not by writerpool, and "
                + "; ".join(ctx.problems(observed))
                + "; writerpool leaves it alone",
                remedy=f"remove it with the client's `mcp remove {SERVER_NAME}`, then --apply",
            )
        elif ctx.matches(observed, ctx.wanted):
            if owned is not None and owned.status == "pending" and mine:
                # An earlier apply was interrupted after the client added it.
                owned = entry_for(target, SERVER_NAME, ctx.wanted, "applied")
                store_record(paths, record.with_entry(owned))
            if mine and ctx.wanted.kind == "http":
                http.hold_token(paths, target)  # a new one, if it was revoked meanwhile
            unchanged(ctx, owned)
        elif observed is not None:
            divergent(ctx, observed, "error")
        else:
            add_registration(
                ctx, record.with_entry(entry_for(target, SERVER_NAME, ctx.wanted, "pending"))
            )
    codex_config.prompt_approval(ctx.report, ctx.where, ctx.target)
    _audit(ctx, "apply")
    return ctx.report


def add_registration(ctx: Ctx, pending: OwnershipRecord) -> None:
    """Record, then ask the client; undo the record (and a token nobody else uses) when
    the client did not take the registration as given."""
    store_record(ctx.paths, pending)
    if ctx.wanted.kind == "http":
        http.hold_token(ctx.paths, ctx.target)
    args = ctx.add_args()
    done = ctx.adapter.cli.run(args, ctx.cwd(), ctx.adapter.add_stdin(ctx.wanted))
    observed = ctx.read()
    if ctx.matches(observed, ctx.wanted) and ctx.problems(observed):
        ctx.adapter.configure(ctx.target, ctx.wanted)
        observed = ctx.read()
    if not ctx.matches(observed, ctx.wanted) or ctx.problems(observed):
        store_record(ctx.paths, pending.without(ctx.target))
        if ctx.wanted.kind == "http":
            http.release_token(ctx.paths, pending.without(ctx.target), ctx.target)
        if done.returncode != 0:
            raise ctx.adapter.cli.fail(args[:2], done)
        raise WriterpoolError(
            "registration_divergent", "the client did not record the registration as given"
        )
    applied = entry_for(ctx.target, SERVER_NAME, ctx.wanted, "applied")
    store_record(ctx.paths, pending.with_entry(applied))
    at = ""
    if ctx.wanted.url is not None:
        at = f" at {ctx.wanted.url} for client {http.client_name(ctx.target)}"
        ctx.report.data.update(url=ctx.wanted.url, client=http.client_name(ctx.target))
    ctx.report.add(
        "registration_applied",
        "ok",
        ctx.where,
        f"added {SERVER_NAME} to {ctx.label}{at}",
        **ctx.command_data(args),
        **ctx.settings_data(),
    )


def _configure(ctx: Ctx, record: OwnershipRecord) -> None:
    """writerpool's own registration lacks settings (added by an older writerpool, or
    changed since): write them, under a pending record first."""
    pending = record.with_entry(entry_for(ctx.target, SERVER_NAME, ctx.wanted, "pending"))
    store_record(ctx.paths, pending)
    ctx.adapter.configure(ctx.target, ctx.wanted)
    left = ctx.problems(ctx.read())
    if left:
        raise WriterpoolError(
            "client_failed", "the client's settings did not take: " + "; ".join(left)
        )
    store_record(
        ctx.paths, pending.with_entry(entry_for(ctx.target, SERVER_NAME, ctx.wanted, "applied"))
    )
    ctx.report.add(
        "registration_applied",
        "ok",
        ctx.where,
        f"set {SERVER_NAME}'s settings in {ctx.label}",
        **ctx.settings_data(),
    )


def remove(paths: Paths, target: Target, adapter: ClientAdapter | None = None) -> Report:
    """Remove the registration only when the record proves writerpool added it as it is,
    whichever transport the record names."""
    ctx = context(paths, target, adapter, f"register {target.name} --remove")
    ctx.adapter.cli.require()
    with locked(paths):
        record = load_record(paths)
        owned = record.find(target)
        if owned is not None:
            ctx = context(paths, target, adapter, "", owned.registration(), ctx.report)
        observed = ctx.read()
        if observed is None:
            if owned is not None:
                store_record(paths, record.without(target))
                if owned.url is not None:
                    http.release_token(paths, record.without(target), target)
            ctx.report.add(
                "registration_absent", "ok", ctx.where, f"{ctx.label} has no {SERVER_NAME}"
            )
        elif owned is None:
            ctx.report.add(
                "ownership_unavailable",
                "error",
                ctx.where,
                f"no record shows that writerpool added {SERVER_NAME} to {ctx.label}; left alone",
                remedy="remove it with the client's own `mcp remove` if it is unwanted",
            )
        elif not ctx.matches(observed, owned.registration()):
            divergent(ctx, observed, "warning")
        else:
            remove_registration(ctx, record)
    _audit(ctx, "remove")
    return ctx.report


def remove_registration(ctx: Ctx, record: OwnershipRecord, revoke: bool = True) -> None:
    """Remove writerpool's own registration; over HTTP also revoke the client's token
    when no other registration of the client uses it (unless `revoke` is off: the
    registration is about to be added again at a new URL)."""
    args = ctx.adapter.remove_args(ctx.target)
    done = ctx.adapter.cli.run(args, ctx.cwd())
    if ctx.read() is not None:
        if done.returncode != 0:
            raise ctx.adapter.cli.fail(args[:2], done)
        raise WriterpoolError("client_failed", "the client still reports the registration")
    store_record(ctx.paths, record.without(ctx.target))
    revoked = ""
    left = record.without(ctx.target)
    if ctx.wanted.kind == "http" and revoke and http.release_token(ctx.paths, left, ctx.target):
        revoked = f" and revoked client {http.client_name(ctx.target)}'s token"
    ctx.report.add(
        "registration_removed",
        "ok",
        ctx.where,
        f"removed {SERVER_NAME} from {ctx.label}{revoked}",
        **ctx.command_data(args),
    )


def _audit(ctx: Ctx, verb: str) -> None:
    codes = ctx.report.codes()
    audit(
        ctx.paths,
        # The audit log takes names and codes only: "register codex.user apply".
        tool_or_command=f"register {ctx.target.client}.{ctx.target.scope} {verb}",
        outcome=codes[-1] if codes else "none",
    )
