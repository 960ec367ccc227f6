"""Settings that stick and say what they change, through the CLI:
`mode show`, a `mode set` plan of every change (old → new), lifecycle and profiles taken
by kept writers, and a new base that moves writers at baseline (work stays put)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_collect_helpers import (
    ready_writer,
    run_agent,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp
from tests.support.repos import make_repo, run_git

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.fixture
def alias() -> str:
    return unique_alias("intent")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=6, files=3)
    run_git(checkout, "branch", "dev2")
    write_workspaces({alias: checkout})
    return checkout


def _messages(report: dict[str, Any], code: str) -> dict[str, str]:
    return {f["target"]: f["message"] for f in report["findings"] if f["code"] == code}


def _changes(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        f["data"]["setting"]: (f["data"]["old"], f["data"]["new"])
        for f in report["findings"]
        if f["code"] == "mode_setting_changed"
    }


def test_mode_show_plan_and_apply_of_a_new_base_and_lifecycle(repo: Path, alias: str) -> None:
    ready_writer(alias, writers=2)
    w1, w2 = f"{alias}-w1", f"{alias}-w2"
    code, shown = wp("mode", "show", alias)
    command = shown["data"]["workspaces"][0]["command"]
    assert command == (
        f"writerpool mode set {alias} container --profiles code --writers 2 --lifecycle "
        "persistent --image default --network none --tags none --cache none --base main"
    )
    code, again = wp(*command.split()[1:])
    assert code == 0 and "mode_unchanged" in codes(again) and _changes(again) == {}, again

    run_agent(w1, "git checkout -q -b feature && git commit -q --allow-empty -m work")
    options = ["--profiles", "code", "--network", "none"]
    code, plan = wp("mode", "set", alias, "container", *options)
    assert code == 0 and _changes(plan) == {"writers": ("2", "1")}, plan
    assert f"{w2} removed" in _messages(plan, "mode_setting_changed")[f"modes/workspace/{alias}"]

    move = [*options, "--writers", "2", "--lifecycle", "ephemeral", "--base", "dev2"]
    code, plan = wp("mode", "set", alias, "container", *move)
    assert code == 0, plan
    assert _changes(plan) == {"lifecycle": ("persistent", "ephemeral"), "base": ("main", "dev2")}
    # A lifecycle change is planned per kept writer, never as "settings match".
    adopted = _messages(plan, "writer_settings_adopted")
    assert set(adopted) == {f"writer/{alias}/{w1}", f"writer/{alias}/{w2}"}, plan
    assert all("lifecycle persistent → ephemeral" in m for m in adopted.values()), adopted
    assert "writer_unchanged" not in codes(plan), plan
    assert list(_messages(plan, "writer_base_kept")) == [f"writer/{alias}/{w1}"]
    assert list(_messages(plan, "writer_base_move_planned")) == [f"writer/{alias}/{w2}"]
    assert state_of(w2).base.name == "main", "a plan changes nothing"

    code, done = wp("mode", "set", alias, "container", *move, "--apply")
    assert code == 0, done
    assert (state_of(w2).base.name, state_of(w2).lifecycle) == ("dev2", "ephemeral")
    assert (state_of(w1).base.name, state_of(w1).lifecycle) == ("main", "ephemeral")
    kept = _messages(done, "writer_base_kept")[f"writer/{alias}/{w1}"]
    assert "stays on main" in kept
    _, status = wp("writer", "status")
    states = {r["name"]: r["state"] for r in status["data"]["writers"]}
    assert states == {w1: "writer_holds_work", w2: "writer_leasable"}, status

    # A provisioning setting: the idle writer would be replaced, the one with work is named.
    code, tags = wp("mode", "set", alias, "container", *move, "--tags", "reachable")
    assert code == 0, tags
    replaced = _messages(tags, "writer_replace_planned")
    assert "tags none → reachable" in replaced[f"writer/{alias}/{w2}"], tags
    held = [f for f in tags["findings"] if f["code"] == "writer_settings_changed"]
    assert [(f["target"], f["status"]) for f in held] == [(f"writer/{alias}/{w1}", "warning")]
    assert "writerpool mode set" in held[0]["remedy"] and "--tags reachable" in held[0]["remedy"]
    assert f"writerpool writer finish {w1} --apply" in held[0]["remedy"]
