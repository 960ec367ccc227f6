"""Small operator-facing behaviours of the CLI, run in-process (no Podman needed):
where the configuration file is, errors that name it, writer_unknown listing the
writers, usage errors as JSON under --json, and `mode show` without a stored mode."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import config_text, make_checkout
from tests.support.cli import run_cli
from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths


def run(*args: str) -> tuple[int, str]:
    done = run_cli(*args)
    return done.code, done.out


def wp(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = run(*args, "--json")
    return code, json.loads(out)


def test_config_init_and_check_show_where_the_file_is(tmp_path: Path) -> None:
    path = Paths.from_env().config_file
    code, report = wp("config", "init")
    assert code == 0 and report["data"]["configFile"] == str(path)
    code, text = run("config", "check")
    assert f"configuration file: {path}" in text
    path.write_text("[workspaces\n")
    code, report = wp("config", "check")
    assert code == 1 and report["findings"][0]["code"] == "config_invalid"
    assert "config.toml (WRITERPOOL_CONFIG)" in report["findings"][0]["message"]


def test_an_error_names_a_config_file_chosen_by_writerpool_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "team-writerpool.toml"
    other.write_text("not toml = = \n")
    monkeypatch.setenv("WRITERPOOL_CONFIG", str(other))
    code, report = wp("writer", "list")
    assert code == 1 and "team-writerpool.toml" in report["findings"][0]["message"], report


def test_writer_unknown_lists_the_writers_and_usage_errors_are_json(tmp_path: Path) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(config_text({"demo": make_checkout(tmp_path / "repo")}))
    (paths.writer_dir("demo-w1") / "clone").mkdir(parents=True)
    code, report = wp("writer", "status", "demo-w7")
    assert code == 2 and report["findings"][0]["code"] == "writer_unknown"
    assert "demo-w1" in report["findings"][0]["message"]
    code, report = wp("writer", "collect", "demo-w7")
    assert code == 2 and "demo-w1" in report["findings"][0]["message"]
    code, report = wp("writer", "status", "--no-such-option")
    assert code == 2 and report["findings"][0]["code"] == "usage_invalid", report
    code, report = wp("mode", "show", "demo")
    assert code == 0 and report["findings"][0]["code"] == "mode_default"
    code, report = wp("mode", "show", "nosuch")
    assert code == 2 and "demo" in report["findings"][0]["message"]


def test_egress_check_and_log_refuse_bad_input_and_read_only_their_writer(
    tmp_path: Path,
) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(config_text({"demo": make_checkout(tmp_path / "repo")}))
    (paths.writer_dir("demo-w1") / "clone").mkdir(parents=True)
    code, report = wp("egress", "check", "demo", "a b.test")
    assert code == 2 and report["findings"][0]["code"] == "usage_invalid"
    code, report = wp("egress", "check", "nosuch", "a.test")
    assert code == 2 and report["findings"][0]["code"] == "alias_unknown"
    code, report = wp("egress", "check", "demo", "mirror.example.test")
    assert code == 1 and report["findings"][0]["data"]["reason"] == "no_allowlist"
    code, report = wp("egress", "log", "demo-w7")
    assert code == 2 and report["findings"][0]["code"] == "writer_unknown"
    code, report = wp("egress", "log", "demo-w1")
    assert code == 0 and report["findings"][0]["code"] == "egress_log_empty"
    lines = [
        {"action": "egress_connect", "writer": "demo-w2", "decision": "denied"},
        {"action": "egress", "writer": "demo-w1"},
        {"action": "egress_connect", "writer": "demo-w1", "decision": "denied",
         "destination": "x.test:443", "reason": "not_listed", "method": "CONNECT"},
        {"action": "egress_connect", "writer": "demo-w1", "decision": "denied",
         "destination": "mirror.test:8443", "reason": "address_private", "method": "CONNECT",
         "entry": "mirror.test:8443", "address": "10.9.8.7"},
        {"action": "egress_connect", "writer": "demo-w1", "decision": "denied",
         "destination": "front.test:443", "reason": "sni_mismatch", "method": "CONNECT",
         "entry": "front.test", "address": "192.0.2.7", "sni": "other.test"},
    ]  # fmt: skip
    paths.audit_log.parent.mkdir(parents=True, exist_ok=True)
    paths.audit_log.write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n")
    code, report = wp("egress", "log", "demo-w1")
    decisions = report["data"]["decisions"]
    assert code == 0 and [d["destination"] for d in decisions] == [
        "x.test:443", "mirror.test:8443", "front.test:443"
    ]  # fmt: skip
    assert [d["admit"] for d in decisions] == ["x.test", "10.9.8.7/32:8443", None]
    code, text = run("egress", "log", "demo-w1")
    assert "DENIED  CONNECT x.test:443: not_listed; to admit it add x.test to --allow" in text
    assert (
        "DENIED  CONNECT mirror.test:8443: address_private 10.9.8.7 (listed as "
        "mirror.test:8443); to admit it add 10.9.8.7/32:8443 to --allow"
    ) in text
    assert "sni_mismatch 192.0.2.7 tls name other.test (listed as front.test);" in text


def test_egress_sets_and_check_say_which_hosts_a_derived_set_names_and_from_where(
    tmp_path: Path,
) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(
        config_text({"demo": tmp_path / "repo"}) + '[egress.sets.corp]\nhosts = ["a.corp.test"]\n'
        '[egress.resolve]\n"pypi.mirror.test" = ["10.1.2.3"]\n'
    )
    home = Path(os.environ["HOME"])
    (home / ".config" / "pip").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nindex-url = https://pypi.mirror.test/simple\n"
    )
    (home / ".npmrc").write_text("registry=https://npm.mirror.test/\n")
    code, report = wp("egress", "sets")
    shown = {f["target"].rpartition("/")[2]: f for f in report["findings"]}
    assert code == 0 and set(shown) == {"corp", "host-pip", "host-uv", "host-npm"}
    assert shown["corp"]["data"]["hosts"] == ["a.corp.test"]
    assert shown["host-pip"]["data"]["hosts"] == ["pypi.mirror.test"]
    assert "pip's configuration" in shown["host-pip"]["message"]
    assert shown["host-npm"]["data"]["hosts"] == ["npm.mirror.test"]
    assert "uv's default index" in shown["host-uv"]["message"]  # uv is configured with none
    settings = ContainerSettings(profiles=("code",), base="main", allow=("host-pip",))
    store_entry(paths, "demo", ModeEntry(mode="container", container=settings))
    code, report = wp("egress", "check", "demo", "pypi.mirror.test:8443")
    assert report["findings"][0]["data"]["admit"] == "pypi.mirror.test:8443"
    code, report = wp("egress", "check", "demo", "pypi.mirror.test")
    [only] = report["findings"]
    assert "(from set host-pip: pip's configuration" in only["message"]
    assert (only["data"]["reason"], only["data"]["admit"]) == ("address_private", "10.1.2.3/32")
