"""Codex as an agent backend: one `codex exec --json` process per turn, the next turn
`codex exec --json … resume <thread id>`, inside the session's container.

A session's container runs a small driver (payload/codex_turns.py, written into the
agent directory as pi's preload is) for its whole life; CodexAgent sends it a line per
turn and per abort, and folds what each Codex process prints into the turn model
through codex_events.py. A turn ends when its process has ended: as Codex said
(`turn.completed`, `turn.failed`), aborted when it was aborted, else failed with
TURN_EXITED_ERROR (a killed or crashed process). The turn's text is Codex's own agent
message.

Its directory (`codex/` in the agent directory, mounted read-only in a writer) holds
`config.toml`: one model provider, `writerpool`, whose base URL is the session's
egress endpoint (the in-writer forwarder on `provider` networking, the provider's own
URL where the network gives the key to the agent) and whose key is read from the
environment variable the driver sets from the `key` file beside it, for each Codex
process only (never an argv). Codex's own sandbox is on inside the writer (it
confines there with the image's bubblewrap: docs/agents.md): the commands Codex runs
write only the clone (its `.git` too, whose config and hooks the writer mounts
read-only) and /tmp, never Codex's home with its config and threads; approvals are
`never` (nobody is there to answer). The writer stays the outer boundary, its network
kind the network's (docs/security.md); host mode never runs this agent.
"""

from __future__ import annotations

import functools
import logging
import re
import stat
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import tomlkit

from writerpool.agent.codex_events import fold_codex, parse_line, thread_of
from writerpool.agent.events import TurnLog
from writerpool.agent.key_file import KeyFile
from writerpool.agent.process import LineAgent, stderr_lines
from writerpool.atomic import write_atomic
from writerpool.config.models import Config, Profile
from writerpool.config.providers import ResolvedProvider, resolve_provider
from writerpool.errors import WriterpoolError
from writerpool.proc import Process

SUBDIR = "codex"
CONFIG_FILE = "config.toml"
DRIVER_FILE = "codex_turns.py"
DRIVER_SOURCE = Path(__file__).resolve().parents[1] / "payload" / DRIVER_FILE
PROVIDER_ID = "writerpool"
TOKEN_VARIABLE = "WRITERPOOL_SESSION_TOKEN"  # noqa: S105 - a variable's name; the driver's too
WIRE_API = "openai-responses"  # Codex speaks the Responses API only
READY, EXITED = "writerpool.ready", "writerpool.exited"  # the driver's own lines
ENDINGS = frozenset({"turn.completed", "turn.failed"})
# A thread id as `resume` takes it (Codex's are UUIDs): never an option.
THREAD_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")
PYTHON = "/usr/bin/python3"
# An aborted turn's process has this long to end on SIGINT before its group is killed.
ABORT_GRACE = 5.0
GIT_DIR = "/work/.git"  # the clone's, in a writer (its workdir)
FORWARDER = "/usr/local/lib/writerpool/egress-forwarder"
# On `provider` networking the image's forwarder is the container's PID 1 and the
# driver its child, as images/pi-launcher does for pi (the driver run by a fork of the
# forwarder's interpreter, not a second one started after it); otherwise the driver runs
# alone.
LAUNCH = (
    'if [ -n "${WRITERPOOL_EGRESS_PORT:-}" ] && [ -n "${WRITERPOOL_EGRESS_SOCKET:-}" ]; then '
    f'exec {PYTHON} -I -S {FORWARDER} --supervise-python "$@"; fi; exec {PYTHON} -I -S "$@"'
)
# pi's variables in a writer's environment are not this agent's.
UNSET = ("NODE_OPTIONS", "PI_CODING_AGENT_DIR")
# The profile's thinking as Codex's model_reasoning_effort.
EFFORT = {"off": "none"}
TURN_EXITED_ERROR = (
    "agent_turn_exited: the agent's process for this turn ended before the turn did "
    "(killed, or it failed); the session takes another prompt; the server log has its "
    "last stderr lines"
)

log = logging.getLogger(__name__)


def _holds(path: Path, data: bytes, mode: int) -> bool:
    """Whether path is a regular file of this mode holding exactly data."""
    try:
        found = path.lstat()
        if not stat.S_ISREG(found.st_mode) or stat.S_IMODE(found.st_mode) != mode:
            return False
        return path.read_bytes() == data
    except OSError:
        return False


@functools.lru_cache(maxsize=16)  # the forwarder's one endpoint and each provider's URL
def config_text(base_url: str) -> bytes:
    """config.toml as written (tomlkit's dump took milliseconds of each session's start)."""
    text = "# Written by writerpool (agent/codex.py) for one session; no key in it.\n"
    return (text + tomlkit.dumps(config_document(base_url))).encode()


def config_document(base_url: str) -> dict[str, Any]:
    """Codex's config.toml: the session's endpoint, the key's variable, no key."""
    return {
        "model_provider": PROVIDER_ID,
        "approval_policy": "never",
        "sandbox_mode": "workspace-write",
        # The clone's .git is writable (Codex would keep it read-only: commits need it);
        # the writer's network kind, not Codex, decides what a command reaches.
        "sandbox_workspace_write": {"writable_roots": [GIT_DIR], "network_access": True},
        "check_for_update_on_startup": False,
        "analytics": {"enabled": False},
        "model_providers": {
            PROVIDER_ID: {
                "name": PROVIDER_ID,
                "base_url": base_url,
                "env_key": TOKEN_VARIABLE,
                "wire_api": "responses",
            }
        },
        # The commands Codex runs do not inherit the token's variable.
        "shell_environment_policy": {"exclude": [TOKEN_VARIABLE]},
    }


class CodexAgent(LineAgent):
    """The driver in a session's container and the turns its Codex processes ran."""

    name = "codex"

    def __init__(self, proc: Process) -> None:
        # Set before the readers start (LineAgent.__init__); read under self._cond.
        self._ready = False
        self._thread: str | None = None  # what the next turn resumes
        self._ending: dict[str, Any] | None = None  # the running turn's last word
        self._aborting = False
        super().__init__(proc)

    def _handshake(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._ready or self._eof, timeout)
            ready, ended = self._ready, self._eof
        if not ready:
            raise self._start_failed("exited" if ended else "did not answer")

    def _prompt_command(self, message: str, prompt_id: str) -> Mapping[str, object]:
        with self._cond:
            self._ending, self._aborting = None, False
            thread = self._thread
        return {"run": {"id": prompt_id, "prompt": message, "thread": thread}}

    def _abort(self, timeout: float) -> None:
        with self._cond:
            prompt_id = self._log.prompt_id
            if prompt_id is None:
                return
            self._aborting = True
        self._send({"abort": prompt_id})
        self.wait_quiet(timeout)

    def _take(self, line: bytes) -> None:
        event = parse_line(line)
        if event is None:
            return
        kind, now = event["type"], time.time()
        if kind == READY:
            with self._cond:
                self._ready = True
                self._cond.notify_all()
        elif kind == EXITED:
            self._fold(lambda turns: self._process_ended(turns, event, now))
        elif kind in ENDINGS:
            with self._cond:  # the turn ends with its process (resume needs it done)
                self._ending = event
        else:
            thread = thread_of(event)
            with self._cond:
                if thread is not None and THREAD_ID.fullmatch(thread):
                    self._thread = thread
            self._fold(lambda turns: fold_codex(turns, event, now))

    def _process_ended(self, turns: TurnLog, event: dict[str, Any], now: float) -> None:
        """The running turn's process ended (under self._cond, from _fold)."""
        if turns.running is None or event.get("id") != turns.prompt_id:
            return
        ending, self._ending = self._ending, None
        if ending is not None and (ending["type"] == "turn.completed" or not self._aborting):
            fold_codex(turns, ending, now)
        elif self._aborting:
            turns.answer("aborted", None, False, now)
            turns.finish(now)
        else:
            log.warning("codex's process for a turn ended (status %s) before the turn did; "
                        "its stderr ended with:\n%s", event.get("status"),
                        "\n".join(stderr_lines(self.stderr_tail())) or "(nothing)")  # fmt: skip
            turns.refused(TURN_EXITED_ERROR, now)
        self._aborting = False


class CodexBackend(KeyFile):
    name = "codex"
    subdir = SUBDIR
    can_warm = False

    def render(self, config: Config, agent_dir: Path, provider: str, container: bool) -> None:
        resolved = resolve_provider(config, provider)
        if resolved is None:
            raise WriterpoolError("provider_unconfigured", f"provider {provider!r} is not known")
        if resolved.api.name != WIRE_API:
            raise WriterpoolError(
                "agent_provider_unsupported",
                f"codex speaks the OpenAI Responses API only; provider {provider!r} is "
                f"{resolved.api.name}",
            )
        custom = config.providers.get(provider)
        url = resolved.base_url
        if custom is not None and container and custom.container_base_url:
            url = custom.container_base_url
        target = agent_dir / SUBDIR
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        driver = DRIVER_SOURCE.read_bytes()
        if not _holds(target / DRIVER_FILE, driver, 0o644):  # as a session before left it
            write_atomic(target / DRIVER_FILE, driver, mode=0o644, durable=False)
        self._write_config(agent_dir, url)

    def _write_config(self, agent_dir: Path, base_url: str) -> None:
        write_atomic(agent_dir / SUBDIR / CONFIG_FILE, config_text(base_url), mode=0o644,
                     durable=False)  # fmt: skip

    def point_at_proxy(
        self, agent_dir: Path, provider: ResolvedProvider, base_url: str, token: str
    ) -> None:
        del provider
        self._write_config(agent_dir, base_url)
        self.write_key(agent_dir, token)

    def container_command(
        self, profile: Profile, read_only: bool, agent_dir: str | Path, session_dir: str
    ) -> list[str]:
        # CODEX_HOME is $HOME/.codex, the driver's choice: on the container's tmpfs but
        # outside /tmp, which Codex's sandbox leaves writable to commands.
        del session_dir
        sandbox = ["--sandbox=read-only"] if read_only else []
        own = PurePosixPath(str(agent_dir)) / SUBDIR
        effort = EFFORT.get(profile.thinking, profile.thinking)
        codex = ["codex", "exec", "--json", "--skip-git-repo-check", f"--model={profile.model}",
                 "--config", f"model_reasoning_effort={effort}", *sandbox]  # fmt: skip
        unset = [arg for name in UNSET for arg in ("-u", name)]
        return ["env", *unset, "sh", "-c", LAUNCH, "sh",
                str(own / DRIVER_FILE), str(own), str(ABORT_GRACE), "--", *codex]  # fmt: skip

    def start(
        self, argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float
    ) -> CodexAgent:
        return CodexAgent.start(argv, env, cwd, timeout)


CODEX = CodexBackend()
