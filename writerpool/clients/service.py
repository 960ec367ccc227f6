"""`writerpool register TARGET`: plan, apply, verify or remove writerpool's one server
registration in a client, through the client's own CLI, with an ownership record.

Rules: a registration named `writerpool` that differs from what writerpool would write
is reported `registration_divergent` and never replaced or removed; `--remove` removes
only what the ownership record proves writerpool added, still unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from writerpool.atomic import ensure_private_dir
from writerpool.audit import audit
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

Action = Literal["plan", "apply", "verify", "remove"]


class HandshakeOutcome(Protocol):
    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def tools(self) -> tuple[str, ...]: ...


# (command line, environment, deadline) -> outcome; writerpool.mcp.handshake provides it.
Handshake = Callable[[Sequence[str], dict[str, str], float], HandshakeOutcome]
ServerEnv = Callable[[dict[str, str]], dict[str, str]]


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
        """The exact client command line (the operator asked to see it: it holds paths)."""
        data: dict[str, Any] = {"argv": self.adapter.cli.argv(args)}
        if self.target.project is not None:
            data["cwd"] = str(self.target.project)
        return data


def _context(paths: Paths, target: Target, adapter: ClientAdapter | None, command: str) -> Ctx:
    report = Report(command)
    report.data["target"] = target.name
    report.data["name"] = SERVER_NAME
    wanted = desired_registration(paths, target.client, target.approve_prompts)
    return Ctx(paths, target, adapter or adapter_for(target), wanted, report)


def _prompt_approval(ctx: Ctx) -> None:
    """Codex: say what the --approve-prompts choice permits, or why prompts ask without it."""
    if ctx.target.client != "codex":
        return
    if ctx.target.approve_prompts:
        ctx.report.add(
            "prompt_approval", "ok", ctx.where,
            "pi_session_prompt is approved (approval_mode = \"approve\"): Codex, `codex "
            "exec` included, lets its model prompt pi sessions without asking; a coding "
            "session's prompt changes a writer's clone (in host mode, your checkout) and "
            "calls the profile's model provider",
        )  # fmt: skip
        return
    ctx.report.add(
        "prompt_approval", "ok", ctx.where,
        "pi_session_prompt asks before each call (interactive Codex) and is refused under "
        "`codex exec` (approval policy never): writerpool marks it destructive and "
        "open-world, since a prompt makes a coding agent change files and call a model "
        "provider",
        remedy="to let Codex prompt sessions without asking, add --approve-prompts",
    )  # fmt: skip


def _divergent(ctx: Ctx, observed: Observed, status: Literal["warning", "error"]) -> None:
    if observed.scope != ctx.target.scope:
        what = f"a registration named {SERVER_NAME} in the {observed.scope} scope shows first"
    elif observed.registration is None:
        what = f"a {observed.kind} server named {SERVER_NAME} is registered"
    else:
        what = f"{SERVER_NAME} is registered with another command or environment"
    ctx.report.add(
        "registration_divergent",
        status,
        ctx.where,
        f"{what}; writerpool leaves it alone",
        remedy=f"inspect it with the client's `mcp get {SERVER_NAME}`; remove it there if unwanted",
    )


def plan(paths: Paths, target: Target, adapter: ClientAdapter | None = None) -> Report:
    """Say what --apply would run; change nothing in the client."""
    ctx = _context(paths, target, adapter, f"register {target.name}")
    cli = ctx.adapter.cli
    observed = ctx.read() if cli.path is not None else None
    if observed is None:
        ctx.report.add(
            "registration_planned",
            "planned",
            ctx.where,
            f"would add {SERVER_NAME} to {ctx.label}",
            **ctx.command_data(ctx.adapter.add_args(target, ctx.wanted)),
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
        _unchanged(ctx, load_record(paths).find(target))
    else:
        _divergent(ctx, observed, "warning")
    if cli.path is None:
        ctx.report.add(
            "client_unavailable",
            "error",
            ctx.where,
            f"{cli.label}'s `{cli.program}` command is not on PATH; nothing was read",
            remedy=f"install {cli.label} or put `{cli.program}` on PATH",
        )
    _prompt_approval(ctx)
    return ctx.report


def _unchanged(ctx: Ctx, owned: OwnedRegistration | None) -> None:
    mine = owned is not None and ctx.adapter.same(owned.registration(), ctx.wanted)
    note = "" if mine else " (not added by writerpool: --remove leaves it)"
    ctx.report.add(
        "registration_unchanged",
        "ok",
        ctx.where,
        f"{ctx.label} already has {SERVER_NAME} as writerpool would write it{note}",
        owned=mine,
    )


def apply(paths: Paths, target: Target, adapter: ClientAdapter | None = None) -> Report:
    """Add the registration through the client's CLI, unless one of that name exists."""
    ctx = _context(paths, target, adapter, f"register {target.name} --apply")
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
            _unchanged(ctx, owned)
        elif observed is not None:
            _divergent(ctx, observed, "error")
        else:
            _add(ctx, record.with_entry(entry_for(target, SERVER_NAME, ctx.wanted, "pending")))
    _prompt_approval(ctx)
    _audit(ctx, "apply")
    return ctx.report


def _add(ctx: Ctx, pending: OwnershipRecord) -> None:
    store_record(ctx.paths, pending)
    args = ctx.adapter.add_args(ctx.target, ctx.wanted)
    done = ctx.adapter.cli.run(args, ctx.cwd())
    observed = ctx.read()
    if ctx.matches(observed, ctx.wanted) and ctx.problems(observed):
        ctx.adapter.configure(ctx.target, ctx.wanted)
        observed = ctx.read()
    if not ctx.matches(observed, ctx.wanted) or ctx.problems(observed):
        store_record(ctx.paths, pending.without(ctx.target))
        if done.returncode != 0:
            raise ctx.adapter.cli.fail(args[:2], done)
        raise WriterpoolError(
            "registration_divergent", "the client did not record the registration as given"
        )
    applied = entry_for(ctx.target, SERVER_NAME, ctx.wanted, "applied")
    store_record(ctx.paths, pending.with_entry(applied))
    ctx.report.add(
        "registration_applied",
        "ok",
        ctx.where,
        f"added {SERVER_NAME} to {ctx.label}",
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


def verify(
    paths: Paths,
    target: Target,
    check: Handshake,
    server_env: ServerEnv,
    timeout: float,
    adapter: ClientAdapter | None = None,
) -> Report:
    """The registration matches exactly, and its command line completes an MCP handshake."""
    ctx = _context(paths, target, adapter, f"register {target.name} --verify")
    ctx.adapter.cli.require()
    observed = ctx.read()
    if observed is None:
        ctx.report.add(
            "registration_absent",
            "error",
            ctx.where,
            f"{ctx.label} has no {SERVER_NAME} registration",
            remedy=f"writerpool register {target.name} --apply",
        )
        return ctx.report
    if not ctx.matches(observed, ctx.wanted) or observed.registration is None:
        _divergent(ctx, observed, "error")
        return ctx.report
    problems = ctx.problems(observed)
    if problems:
        ctx.report.add(
            "registration_divergent",
            "error",
            ctx.where,
            f"{ctx.label} would not use {SERVER_NAME} as needed: " + "; ".join(problems),
            remedy=f"writerpool register {target.name} --apply",
        )
        return ctx.report
    _unchanged(ctx, load_record(paths).find(target))
    # The handshake runs the registered command line, as the client would start it.
    registered = observed.registration
    outcome = check(registered.argv(), server_env(dict(registered.env)), timeout)
    ctx.report.add(
        outcome.code,
        "ok" if outcome.code == "mcp_verified" else "error",
        ctx.where,
        outcome.message,
        tools=list(outcome.tools),
    )
    return ctx.report


def remove(paths: Paths, target: Target, adapter: ClientAdapter | None = None) -> Report:
    """Remove the registration only when the record proves writerpool added it as it is."""
    ctx = _context(paths, target, adapter, f"register {target.name} --remove")
    ctx.adapter.cli.require()
    with locked(paths):
        record = load_record(paths)
        owned = record.find(target)
        observed = ctx.read()
        if observed is None:
            if owned is not None:
                store_record(paths, record.without(target))
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
            _divergent(ctx, observed, "warning")
        else:
            _remove(ctx, record)
    _audit(ctx, "remove")
    return ctx.report


def _remove(ctx: Ctx, record: OwnershipRecord) -> None:
    args = ctx.adapter.remove_args(ctx.target)
    done = ctx.adapter.cli.run(args, ctx.cwd())
    if ctx.read() is not None:
        if done.returncode != 0:
            raise ctx.adapter.cli.fail(args[:2], done)
        raise WriterpoolError("client_failed", "the client still reports the registration")
    store_record(ctx.paths, record.without(ctx.target))
    ctx.report.add(
        "registration_removed",
        "ok",
        ctx.where,
        f"removed {SERVER_NAME} from {ctx.label}",
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
