"""Checks of what the operator configured: config.toml, execution modes, workspaces,
profiles."""

from __future__ import annotations

import os
from pathlib import Path

from writerpool.config.models import Config
from writerpool.config.modes import ContainerSettings, placements
from writerpool.config.network import describe
from writerpool.config.providers import BUILTINS, resolve_provider
from writerpool.doctor.engine import PASTA_SINCE
from writerpool.doctor.model import CheckContext, CheckResult
from writerpool.runtime.info import version_tuple

EDIT_CONFIG = "edit the configuration file (writerpool config check repeats this message)"


def config_file(ctx: CheckContext) -> list[CheckResult]:
    error = ctx.config_error
    if error is not None and error.code == "config_missing":
        return [
            CheckResult(
                "config_file",
                "warning",
                "config",
                "no configuration file yet",
                "run writerpool config init, then add workspaces",
            )
        ]
    if error is not None:
        return [
            CheckResult("config_file", "error", "config", error.message, EDIT_CONFIG, blocking=True)
        ]
    assert ctx.loaded is not None
    config = ctx.loaded.config
    return [
        CheckResult(
            "config_file",
            "ok",
            "config",
            f"valid: {len(config.workspaces)} workspace(s), {len(config.profiles)} profile(s)",
            data={"fingerprint": ctx.loaded.fingerprint},
        )
    ]


def execution_modes(ctx: CheckContext) -> list[CheckResult]:
    if ctx.modes_error is not None:
        return [
            CheckResult(
                "execution_modes",
                "error",
                "modes",
                ctx.modes_error.message,
                "restore execution-modes.json from a backup, or move it aside and set each "
                "workspace's mode again with writerpool mode set",
                blocking=True,
            )
        ]
    if ctx.modes is None:
        return []
    return [
        CheckResult(
            "execution_modes",
            "ok",
            "modes",
            f"{len(ctx.modes.workspaces)} workspace mode(s) recorded",
        )
    ]


def workspace_checkouts(ctx: CheckContext) -> list[CheckResult]:
    if ctx.loaded is None:
        return []
    return [_checkout(ctx, alias, path) for alias, path in ctx.loaded.config.workspaces.items()]


def _checkout(ctx: CheckContext, alias: str, path: Path) -> CheckResult:
    subject = f"workspace/{alias}"
    fix = (
        f"point workspaces.{alias} in the configuration at a git checkout, or clone the "
        "repository there"
    )
    if not path.exists():
        problem = "the checkout does not exist"
    elif not path.is_dir():
        problem = "the workspace path is not a directory"
    elif not os.access(path, os.R_OK | os.X_OK):
        problem = f"the checkout is not readable by {ctx.facts.user}"
        fix = f"give {ctx.facts.user} read access to the checkout"
    else:
        # A directory (ordinary clone) or a file (linked worktree); git itself is not
        # run in an operator checkout just to ask.
        dot_git = path / ".git"
        if not (dot_git.is_dir() or dot_git.is_file()):
            problem = "not a git repository (no .git)"
        elif not os.access(dot_git, os.R_OK):
            problem = f"the repository is not readable by {ctx.facts.user}"
            fix = f"give {ctx.facts.user} read access to the checkout's .git"
        else:
            return CheckResult("workspace_checkout", "ok", subject, "a readable git checkout")
    return CheckResult("workspace_checkout", "error", subject, problem, fix, blocking=True)


def workspace_modes(ctx: CheckContext) -> list[CheckResult]:
    if ctx.loaded is None or ctx.modes is None:
        return []
    config = ctx.loaded.config
    coding = any(p.permission == "coding" for p in config.profiles.values())
    results = []
    for alias in config.workspaces:
        entry = ctx.modes.workspaces.get(alias)
        subject = f"workspace/{alias}"
        if entry is None and coding:
            results.append(
                CheckResult(
                    "workspace_mode",
                    "warning",
                    subject,
                    "mode unset: coding sessions run on the host, in the operator's checkout",
                    f"writerpool mode set {alias} container --profiles PROFILES --apply (or host "
                    "--accept-host-writes, or read-only)",
                )
            )
        elif entry is None:
            results.append(
                CheckResult(
                    "workspace_mode", "ok", subject, "mode unset; no coding profile is configured"
                )
            )
        elif entry.container is None:
            results.append(CheckResult("workspace_mode", "ok", subject, f"mode {entry.mode}"))
        else:
            results.append(_container_mode(ctx, config, alias, entry.container))
    return results


def session_placement(ctx: CheckContext) -> list[CheckResult]:
    """Where each workspace's coding and read-only sessions run. Read-only sessions are
    always contained: without the writer image they cannot start (never uncontained)."""
    if ctx.loaded is None or ctx.modes is None:
        return []
    results = []
    for alias in ctx.loaded.config.workspaces:
        where = placements(ctx.modes.workspaces.get(alias))
        coding = where["coding"] or "refused"
        message = f"coding sessions: {coding}; read-only sessions: {where['readOnly']}"
        data = {"coding": where["coding"], "readOnly": where["readOnly"]}
        if ctx.pin is None:
            results.append(
                CheckResult(
                    "session_placement", "warning", f"workspace/{alias}",
                    message + "; read-only sessions cannot start without the writer image",
                    "writerpool image build", data=data,
                )
            )  # fmt: skip
            continue
        if coding == "host":
            message += " (coding runs uncontained, with your rights)"
        results.append(
            CheckResult("session_placement", "ok", f"workspace/{alias}", message, data=data)
        )
    return results


def _container_mode(
    ctx: CheckContext, config: Config, alias: str, settings: ContainerSettings
) -> CheckResult:
    subject = f"workspace/{alias}"
    fix = (
        f"writerpool mode set {alias} container with settings this host supports "
        "(see writerpool doctor) --apply"
    )
    for name in settings.profiles:
        profile = config.profiles.get(name)
        if profile is None or profile.permission != "coding":
            return CheckResult(
                "workspace_mode",
                "error",
                subject,
                f"container profile {name} is not a configured coding profile",
                fix,
                blocking=True,
            )
    info = ctx.facts.podman_info
    if (
        settings.network == "pasta"
        and info is not None
        and version_tuple(info.version.version) < PASTA_SINCE
    ):
        return CheckResult(
            "workspace_mode",
            "error",
            subject,
            f"network pasta needs Podman 4.4; this is {info.version.version}",
            fix.replace("with settings", "--network slirp4netns with settings"),
            blocking=True,
        )
    if (
        settings.image != "default"
        and info is not None
        and not ctx.facts.images.get(settings.image, False)
    ):
        return CheckResult(
            "workspace_mode",
            "error",
            subject,
            f"the workspace's image {settings.image[:12]} is not in Podman's storage",
            fix,
            blocking=True,
        )
    return CheckResult(
        "workspace_mode",
        "ok",
        subject,
        f"container mode: {settings.writers} writer(s), network {describe(settings.network)}",
        data={"writers": settings.writers, "network": settings.network},
    )


def profile_providers(ctx: CheckContext) -> list[CheckResult]:
    if ctx.loaded is None:
        return []
    config = ctx.loaded.config
    results = []
    for alias, profile in config.profiles.items():
        subject = f"profile/{alias}"
        coding = profile.permission == "coding"
        where = "host and writers" if coding else "host"
        if profile.provider in config.providers:
            results.append(
                CheckResult(
                    "profile_provider",
                    "ok",
                    subject,
                    f"provider {profile.provider} from [providers] ({where})",
                )
            )
        elif resolve_provider(config, profile.provider) is not None:
            results.append(
                CheckResult(
                    "profile_provider",
                    "ok",
                    subject,
                    f"provider {profile.provider} is built into pi and reached through "
                    f"writerpool's proxy ({where})",
                )
            )
        else:
            results.append(
                CheckResult(
                    "profile_provider",
                    "error",
                    subject,
                    f"provider {profile.provider} is neither one of the pi providers writerpool "
                    "can proxy nor declared under [providers], so no session of this profile "
                    "can start",
                    f"add [providers.{profile.provider}] with base_url (and api_key_env), or use a "
                    f"pi provider writerpool supports ({', '.join(sorted(BUILTINS))})",
                    blocking=coding,
                )
            )
    return results
