"""Claude Code and Codex in the writer image: their npm packages, pinned by version and
integrity, fetched by writerpool's own npm (`--ignore-scripts`) into a prefix on the
host, and only their native binaries staged into the build context `agents` that
images/Containerfile copies (docs/agents.md). Neither needs Node.js.

npm checks each tarball against the integrity the registry's metadata names; the pins
here check that metadata: a package whose integrity in npm's lock differs from its pin
is refused (agent_pin_mismatch) and nothing is staged. The platform package (the one
holding the binary) is pinned too, per machine.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from writerpool.agent.install import npm_argv, npm_env, npm_error
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, run

NPM_TIMEOUT = 1800.0
CONTEXT = "agents"


@dataclass(frozen=True)
class Pin:
    """One npm package as npm's lock names it: its folder under node_modules, its
    version and its integrity (the registry's `dist.integrity`)."""

    package: str
    version: str
    integrity: str


@dataclass(frozen=True)
class NativeAgent:
    """An agent whose npm package carries a native binary in a platform package.
    `files` maps a path in the staged context to a path in the platform package;
    `{triple}` stands for the machine's target triple."""

    command: str
    main: Pin
    platforms: Mapping[str, Pin]  # machine → platform package
    files: Mapping[str, str]
    triples: Mapping[str, str]

    def platform_pin(self, machine: str) -> Pin:
        found = self.platforms.get(machine)
        if found is None:
            raise WriterpoolError(
                "image_build_failed", f"no pinned {self.command} package for the machine {machine}"
            )
        return found


CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"

CLAUDE_CODE = NativeAgent(
    command="claude",
    main=Pin("@anthropic-ai/claude-code", CLAUDE_VERSION,
             "sha512-tvSh6bLvEbd97APD31AnojOrRC3AmcRj5R8sF8QIQitu3x2ucOb1kKmTkGDw41kjva+CGJfpkt+wYouk6yv56Q=="),
    platforms={
        "x86_64": Pin("@anthropic-ai/claude-code-linux-x64", CLAUDE_VERSION,
                      "sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw=="),
        "aarch64": Pin("@anthropic-ai/claude-code-linux-arm64", CLAUDE_VERSION,
                       "sha512-BlHNEtK38KBPWU31F4lUSS9sHclCyfWbThT1CErvxxH8+XcljYLZlQwdyXBkTD62rw1TgfE1u1a+quMWS0NSJg=="),
    },
    # The main package's bin/claude.exe is a placeholder its postinstall script replaces.
    files={"claude/claude": "claude"},
    triples={},
)  # fmt: skip

CODEX = NativeAgent(
    command="codex",
    main=Pin("@openai/codex", CODEX_VERSION,
             "sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg=="),
    platforms={
        "x86_64": Pin("@openai/codex-linux-x64", f"{CODEX_VERSION}-linux-x64",
                      "sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw=="),
        "aarch64": Pin("@openai/codex-linux-arm64", f"{CODEX_VERSION}-linux-arm64",
                       "sha512-9z17t4bbUJ9UCIb49O4PoA+ki+45q3rd8nZ8PeH6sYnlKkBld/Xpo/OS3h3Ti954+foshX4o7k5TCU8N7zzqQA=="),
    },
    # The vendor layout codex reads beside its binary (codex-package.json names the
    # folders); codex-resources/voice is left out: no writer speaks.
    files={
        "codex/codex-package.json": "vendor/{triple}/codex-package.json",
        "codex/bin/codex": "vendor/{triple}/bin/codex",
        "codex/bin/codex-code-mode-host": "vendor/{triple}/bin/codex-code-mode-host",
        "codex/codex-resources/bwrap": "vendor/{triple}/codex-resources/bwrap",
        "codex/codex-path/rg": "vendor/{triple}/codex-path/rg",
    },
    triples={"x86_64": "x86_64-unknown-linux-musl", "aarch64": "aarch64-unknown-linux-musl"},
)  # fmt: skip

NATIVE_AGENTS = (CLAUDE_CODE, CODEX)
# Symbolic links staged beside the files: `codex` on PATH runs the binary in its layout.
LINKS = {"bin/codex": "/opt/codex/bin/codex"}


def pins_text(agents: tuple[NativeAgent, ...] = NATIVE_AGENTS) -> str:
    """The pins as one line (an input of the image: a new pin builds a new image)."""
    return " ".join(f"{a.main.package}@{a.main.version}={a.main.integrity}" for a in agents)


def versions() -> dict[str, str]:
    """`claude` and `codex` → the version an image built now carries."""
    return {agent.command: agent.main.version for agent in NATIVE_AGENTS}


def image_versions(labels: Mapping[str, str]) -> dict[str, str]:
    """The agents a built image carries and their versions, read from its labels
    (pi's, and pins_text's line): empty for an image without them."""
    found = {}
    if labels.get("io.writerpool.pi"):
        found["pi"] = labels["io.writerpool.pi"]
    commands = {agent.main.package: agent.command for agent in NATIVE_AGENTS}
    for item in labels.get("io.writerpool.agents", "").split():
        package, _, version = item.partition("=")[0].rpartition("@")
        if package in commands and version:
            found[commands[package]] = version
    return found


def wanted(machine: str, agents: tuple[NativeAgent, ...] = NATIVE_AGENTS) -> list[Pin]:
    """Every package to check in npm's lock on this machine."""
    return [pin for agent in agents for pin in (agent.main, agent.platform_pin(machine))]


def lock_mismatches(lock: Mapping[str, object], pins: list[Pin]) -> list[str]:
    """What in npm's lock (package-lock.json's `packages`) differs from the pins."""
    packages = lock.get("packages") if isinstance(lock, Mapping) else None
    if not isinstance(packages, Mapping):
        return ["npm's lock has no packages"]
    problems = []
    for pin in pins:
        entry = packages.get(f"node_modules/{pin.package}")
        if not isinstance(entry, Mapping):
            problems.append(f"{pin.package} is not installed")
        elif entry.get("version") != pin.version:
            problems.append(f"{pin.package} is {entry.get('version')!r}, pinned {pin.version}")
        elif entry.get("integrity") != pin.integrity:
            problems.append(f"{pin.package} {pin.version} has another integrity than its pin")
    return problems


def _read_lock(prefix: Path) -> Mapping[str, object]:
    try:
        document = json.loads((prefix / "package-lock.json").read_bytes())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, Mapping) else {}


def check_pins(prefix: Path, machine: str) -> None:
    """Refuse (agent_pin_mismatch) what npm installed in prefix unless it is what the
    pins name."""
    problems = lock_mismatches(_read_lock(prefix), wanted(machine))
    if problems:
        raise WriterpoolError(
            "agent_pin_mismatch",
            "the agent packages npm installed differ from writerpool's pins: "
            + "; ".join(problems[:4]),
        )


def sources(prefix: Path, machine: str) -> dict[str, Path]:
    """Staged name → the installed file it comes from."""
    found = {}
    for agent in NATIVE_AGENTS:
        package = prefix / "node_modules" / agent.platform_pin(machine).package
        triple = agent.triples.get(machine, "")
        for name, inside in agent.files.items():
            found[name] = package / inside.format(triple=triple)
    return found


def installed(prefix: Path, machine: str | None = None) -> bool:
    """Whether prefix holds the pinned packages and every file staged from them."""
    machine = machine or platform.machine()
    try:
        if lock_mismatches(_read_lock(prefix), wanted(machine)):
            return False
        return all(path.is_file() for path in sources(prefix, machine).values())
    except WriterpoolError:
        return False


def install(prefix: Path, machine: str | None = None) -> None:
    """npm install the pinned packages into prefix (scripts never run), then check them."""
    machine = machine or platform.machine()
    if installed(prefix, machine):
        return
    prefix.mkdir(parents=True, exist_ok=True)
    specs = [f"{agent.main.package}@{agent.main.version}" for agent in NATIVE_AGENTS]
    argv = npm_argv(
        "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--save-exact",
        "--omit=dev", "--ignore-scripts", *specs,
    )  # fmt: skip
    try:
        run(argv, env=npm_env(), timeout=NPM_TIMEOUT)
    except CommandFailed as exc:
        raise WriterpoolError(
            "image_build_failed", f"installing Claude Code and Codex with npm failed: "
            f"{npm_error(exc)}",
        ) from exc  # fmt: skip
    check_pins(prefix, machine)
    missing = [name for name, path in sources(prefix, machine).items() if not path.is_file()]
    if missing:
        raise WriterpoolError(
            "image_build_failed", f"the agent packages lack {', '.join(sorted(missing))}"
        )


def stage(prefix: Path, context: Path, machine: str | None = None) -> Path:
    """The build context `agents`: the binaries in their layout, hard-linked from prefix
    where one file system holds both (else copied)."""
    machine = machine or platform.machine()
    check_pins(prefix, machine)
    shutil.rmtree(context, ignore_errors=True)
    for name, source in sources(prefix, machine).items():
        target = context / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
    for name, points_to in LINKS.items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        (context / name).symlink_to(points_to)
    return context
