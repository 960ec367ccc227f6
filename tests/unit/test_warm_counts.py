"""Per-host warm counts: `--warm N` spread as the writers are placed, `--warm HOST=N,…`
given per host and checked against the placement, and the warm pool's places."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from writerpool.config.modes import ContainerSettings, ExecutionModes, ModeEntry, parse_warm
from writerpool.pool.claims.warm_counts import wanted


def _settings(**given: object) -> ContainerSettings:
    return ContainerSettings.model_validate({"profiles": ("code",), "base": "main", **given})


def test_a_count_is_spread_as_the_writers_are_placed() -> None:
    spread = _settings(writers=4, warm=3, hosts=("local", "b"))
    assert spread.warm_by_host() == {"local": 2, "b": 1}
    assert _settings(writers=2, warm=1).warm_by_host() == {"local": 1}
    assert _settings(writers=2).warm_by_host() == {}


def test_counts_per_host_are_parsed_stored_and_checked_against_the_placement() -> None:
    assert parse_warm("2") == (2, None)
    assert parse_warm("local=1, b=2") == (3, {"local": 1, "b": 2})
    for bad in ("b", "b=x", "=1", "b=1,b=2", "B=1"):
        with pytest.raises(ValueError, match="warm"):
            parse_warm(bad)
    given = _settings(writers=4, warm=3, hosts=("local", "b"), warm_hosts={"local": 1, "b": 2})
    assert given.warm_by_host() == {"local": 1, "b": 2}
    assert given.model_dump(by_alias=True)["warmHosts"] == {"local": 1, "b": 2}
    with pytest.raises(ValidationError, match="not one of the hosts"):
        _settings(writers=2, warm=1, warm_hosts={"c": 1})
    with pytest.raises(ValidationError, match="holds 1 writer"):
        _settings(writers=2, warm=2, hosts=("local", "b"), warm_hosts={"b": 2})
    with pytest.raises(ValidationError, match="add up"):
        _settings(writers=2, warm=2, warm_hosts={"local": 1})


def test_the_pool_keeps_each_workspace_on_each_of_its_hosts() -> None:
    modes = ExecutionModes(workspaces={
        "a": ModeEntry(mode="container", container=_settings(
            writers=3, warm=2, hosts=("local", "b"))),
        "c": ModeEntry(mode="container", container=_settings(writers=1)),
        "d": ModeEntry(mode="read-only"),
    })  # fmt: skip
    assert wanted(modes) == {("a", "local"): 1, ("a", "b"): 1}
