"""Drive one pi process over its RPC mode (JSON lines on stdin and stdout).

The process plumbing is LineAgent's (process.py); this module says how pi is spoken
to: commands with ids answered by `response` lines, prompts and aborts, and pi's events
folded into turns (pi_events.py). Stdin stays open until close(): closing it makes pi
0.73.1 exit at once, mid-turn or not.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping
from pathlib import Path

from writerpool.agent.launch import NULL_SESSION
from writerpool.agent.pi_events import PiEvent, fold_pi, parse_event
from writerpool.agent.process import LineAgent
from writerpool.errors import WriterpoolError
from writerpool.proc import Process

__all__ = ["PiAgent"]

log = logging.getLogger(__name__)


class PiAgent(LineAgent):
    """One running pi process and the turns it ran. Thread-safe."""

    name = "pi"

    def __init__(self, proc: Process) -> None:
        self._ids = itertools.count(1)
        self._pending: set[str] = set()
        self._responses: dict[str, PiEvent] = {}
        super().__init__(proc)

    def _handshake(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        # Retries would end one prompt with several agent_end events.
        for command in ({"type": "set_auto_retry", "enabled": False}, {"type": "get_state"}):
            answer = self._request(command, max(0.0, deadline - time.monotonic()))
            if answer is None:
                # A failed write can precede the reader's EOF: ask the process itself.
                why = "exited" if self._exited(0.5) else f"did not answer within {timeout:g}s"
                raise self._start_failed(why)
            if not answer.success:
                raise WriterpoolError("session_start_failed", "the agent refused its setup")

    def configure(self, provider: str, model: str, thinking: str, timeout: float) -> None:
        """Give an idle pi a fresh session of this provider, model and thinking level,
        persisting nothing. `switch_session` to the null device rebuilds pi's runtime,
        which reads the agent directory's models.json again (the session's credential and
        endpoint, written after pi started, are used from now on), on an empty session
        whose every entry is written to /dev/null: the state of a cold start (a session
        derived from it would go to /dev, no clone either). Never `new_session`: it makes
        pi persist its transcript in a file of its own, and in its working directory (the
        clone) when pi's session has no directory."""
        deadline = time.monotonic() + timeout
        for command in (
            {"type": "switch_session", "sessionPath": NULL_SESSION},
            {"type": "set_model", "provider": provider, "modelId": model},
            {"type": "set_thinking_level", "level": thinking},
        ):
            answer = self._request(command, max(0.0, deadline - time.monotonic()))
            if answer is None or not answer.success:
                why = "did not answer" if answer is None else "refused"
                raise WriterpoolError(
                    "session_start_failed", f"the agent {why} its {command['type']}"
                )

    def _prompt_command(self, message: str, prompt_id: str) -> Mapping[str, object]:
        return {"type": "prompt", "message": message, "id": prompt_id}

    def _abort(self, timeout: float) -> None:
        # pi answers an abort after the aborted run emitted its agent_end.
        self._request({"type": "abort"}, timeout)

    def _request(self, command: Mapping[str, object], timeout: float) -> PiEvent | None:
        """Send a command and wait for its response; None on timeout or exit."""
        request_id = f"wp-{next(self._ids)}"
        with self._cond:
            self._pending.add(request_id)
        try:
            if not self._send({**command, "id": request_id}):
                return None
            with self._cond:
                self._cond.wait_for(lambda: request_id in self._responses or self._eof, timeout)
                return self._responses.pop(request_id, None)
        finally:
            with self._cond:
                self._pending.discard(request_id)
                self._responses.pop(request_id, None)

    def _take(self, line: bytes) -> None:
        event = parse_event(line)
        if event is None:
            return
        if event.type == "response":
            with self._cond:
                if self.startup_seconds is None:
                    self.startup_seconds = time.monotonic() - self._started
                if event.response_id in self._pending:
                    self._responses[event.response_id] = event
        self._fold(lambda turns: fold_pi(turns, event, time.time()))
        if event.error is not None:  # sanitized in parse_event; for the operator only
            log.warning("pi (pid %d): the model's answer failed: %s", self._proc.pid, event.error)


def start_pi(argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float) -> PiAgent:
    return PiAgent.start(argv, env, cwd, timeout)
