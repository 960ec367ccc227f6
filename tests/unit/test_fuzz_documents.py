"""Hypothesis: whatever bytes config.toml, execution-modes.json or a writer's state.json
hold, loading them ends in a value or a WriterpoolError with the file's own code."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from writerpool.config.models import parse_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.state.writer import load_state

FUZZ = settings(
    max_examples=int(os.environ.get("WRITERPOOL_FUZZ_EXAMPLES", "300")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                   max_size=4),
    max_leaves=30,
)  # fmt: skip
MODES_KEYS = st.sampled_from(
    ["schemaVersion", "workspaces", "mode", "container", "profiles", "writers", "image",
     "network", "base", "acceptHostWrites"]
)  # fmt: skip
mode_like = st.recursive(
    json_values,
    lambda inner: st.dictionaries(MODES_KEYS | st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)
TOML_PIECES = st.sampled_from([
    "[workspaces]\n", "[profiles.a]\n", "[providers.p]\n", "[pool]\n", "a = 1\n", 'b = "x"\n',
    "permission = \"coding\"\n", "provider = \"p\"\n", "model = \"m\"\n", "default = true\n",
    "base_url = \"http://127.0.0.1:9/v1\"\n", "c = [[[1]]]\n", "d = {e = 1}\n", "= \n", "\x00",
    "lease_wait_seconds = -1\n", "[[x]]\n", "f = 1979-05-27T07:32:00Z\n",
])  # fmt: skip
config_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(TOML_PIECES, max_size=12).map(lambda parts: "".join(parts).encode()),
    st.integers(1, 3000).map(lambda depth: b"a = " + b"[" * depth + b"]" * depth),
)


@FUZZ
@given(raw=config_bytes)
def test_any_config_bytes_parse_or_are_config_invalid(raw: bytes) -> None:
    try:
        parse_config(raw)
    except WriterpoolError as exc:
        assert exc.code == "config_invalid"


def _doc(value: object) -> bytes:
    return json.dumps(value).encode()


documents = st.one_of(
    st.binary(max_size=200),
    mode_like.map(_doc),
    st.integers(1, 3000).map(lambda depth: b"[" * depth + b"]" * depth),
)


@FUZZ
@given(raw=documents)
def test_any_modes_bytes_load_or_are_modes_file_invalid(raw: bytes, isolated_env: Path) -> None:
    paths = Paths.from_env()
    paths.modes_file.parent.mkdir(parents=True, exist_ok=True)
    paths.modes_file.write_bytes(raw)
    try:
        load_modes(paths)
    except WriterpoolError as exc:
        assert exc.code == "modes_file_invalid"


STATE_KEYS = st.sampled_from(["schema_version", "name", "alias", "base", "phase", "baseline",
                              "collection", "profiles", "lifecycle"])  # fmt: skip
state_like = st.recursive(
    json_values,
    lambda inner: st.dictionaries(STATE_KEYS | st.text(max_size=8), inner, max_size=6),
    max_leaves=30,
)


@FUZZ
@given(raw=st.one_of(documents, state_like.map(_doc)))
def test_any_state_bytes_load_or_are_a_state_finding(raw: bytes, tmp_path: Path) -> None:
    wdir = tmp_path / "w"
    wdir.mkdir(exist_ok=True)
    (wdir / "state.json").write_bytes(raw)
    try:
        load_state(wdir)
    except WriterpoolError as exc:
        assert exc.code in ("writer_state_invalid", "writer_state_unreadable")
