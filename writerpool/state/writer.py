"""A writer's state.json: versioned, validated, written atomically (0600)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.atomic import write_atomic
from writerpool.config.paths import WriterRecord
from writerpool.errors import WriterpoolError
from writerpool.untrusted import DocumentRefused, loads_json, read_regular

STATE_SCHEMA_VERSION = 1
Phase = Literal["provisioning", "not_ready", "ready"]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseRecord(Strict):
    name: str  # short branch name as the operator gave it, e.g. "main" or "origin/main"
    ref: str  # the full ref in the operator's checkout
    commit: str
    branch: str  # the branch name inside the clone


class Baseline(Strict):
    head: str
    commit: str
    branches: dict[str, str]
    # Full tag ref -> value the clone held when made (empty unless `--tags reachable`).
    # Absent in states written before it was recorded: such a writer with tags reads
    # as not at baseline until its next reset.
    tags: dict[str, str] = {}


class Collection(Strict):
    digest: str
    complete: bool
    at: str
    bundle: str | None = None  # file name under collections/
    # The review refs this collection wrote (absent in states written before they were).
    refs: tuple[str, ...] = ()


class WriterState(Strict):
    schema_version: Literal[1] = 1
    name: str
    alias: str
    settings_digest: str
    image: str  # "default" (the pin) or a 64-hex image id
    network: str
    cache: str
    lifecycle: str
    tags: str
    profiles: tuple[str, ...]
    base: BaseRecord
    baseline: Baseline | None = None
    phase: Phase = "provisioning"
    reason: str | None = "writer_provisioned"
    fingerprint: str | None = None
    accepted_at: str | None = None
    collection: Collection | None = None
    # The host the writer lives on: `local`, or a [hosts.NAME] of the configuration.
    host: str = "local"
    updated_at: str = Field(default_factory=now)


def state_file(writer_dir: Path) -> Path:
    return WriterRecord(writer_dir).state_file


def load_state(writer_dir: Path) -> WriterState | None:
    """The writer's state, or None when it has none; a broken file raises."""
    path = state_file(writer_dir)
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return None
    except DocumentRefused as exc:
        raise WriterpoolError(
            "writer_state_unreadable", f"the writer's state {exc.reason}"
        ) from exc
    except OSError as exc:
        raise WriterpoolError(
            "writer_state_unreadable", "the writer's state cannot be read"
        ) from exc
    try:
        data = loads_json(raw)
    except DocumentRefused as exc:
        raise WriterpoolError("writer_state_invalid", f"the writer's state {exc.reason}") from exc
    except ValueError as exc:
        raise WriterpoolError("writer_state_invalid", "the writer's state is not JSON") from exc
    if isinstance(data, dict) and data.get("schema_version") != STATE_SCHEMA_VERSION:
        raise WriterpoolError("writer_state_invalid", "the writer's state has an unknown version")
    try:
        return WriterState.model_validate(data)
    except ValidationError as exc:
        raise WriterpoolError("writer_state_invalid", "the writer's state is malformed") from exc


def save_state(writer_dir: Path, state: WriterState) -> WriterState:
    state = state.model_copy(update={"updated_at": now()})
    data = json.dumps(state.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    write_atomic(state_file(writer_dir), data.encode(), mode=0o600)
    return state
