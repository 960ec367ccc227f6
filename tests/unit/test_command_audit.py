"""Every operator command appends one audit line from the top-level handler: what,
which writer, the outcome code, and --discard/--apply when given. The CLI runs
in-process, through the same handler as `python -m writerpool`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import config_text, make_checkout
from tests.support.cli import run_cli
from writerpool.audit import warm_line
from writerpool.config.paths import Paths


def wp(*args: str) -> int:
    return run_cli(*args).code


def lines() -> list[dict[str, Any]]:
    log = Paths.from_env().audit_log
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def configured(tmp_path: Path) -> Path:
    config = Paths.from_env().config_file
    config.parent.mkdir(parents=True)
    config.write_text(config_text({"demo": make_checkout(tmp_path / "checkout", commits=1)}))
    return config


CASES = [
    (("writer", "remove", "demo-w1", "--discard"), "writer remove", "demo-w1", "writer_unknown"),
    (("writer", "reset", "demo-w2", "--discard", "--apply"), "writer reset", "demo-w2",
     "writer_unknown"),
    (("writer", "collect", "demo-w1", "--apply"), "writer collect", "demo-w1", "writer_unknown"),
    (("writer", "finish", "demo-w1"), "writer finish", "demo-w1", "writer_unknown"),
    (("writer", "recreate", "demo-w1"), "writer recreate", "demo-w1", "writer_unknown"),
    (("writer", "list"), "writer list", None, "ok"),
    (("mode", "set", "demo", "container", "--profiles", "code", "--image", "Zz", "--apply"),
     "mode set", None, "usage_invalid"),
    (("mode", "set", "demo", "container", "--profiles", "code", "--image", "zz", "--apply"),
     "mode set", None, "image_name_unknown"),
    (("mode", "set", "nope", "read-only"), "mode set", None, "alias_unknown"),
    (("mode", "set", "demo", "read-only", "--apply"), "mode set", None, "ok"),
    (("writer", "list", "--bogus"), "writer list", None, "usage_invalid"),
    (("control",), "control", None, "ok"),
    (("config", "check"), "config check", None, "ok"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "action", "writer", "outcome"), CASES)
def test_each_operator_command_is_audited(
    configured: Path, argv: tuple[str, ...], action: str, writer: str | None, outcome: str
) -> None:
    wp(*argv)
    [line] = lines()
    assert (line["action"], line["writer"], line["outcome"]) == (action, writer, outcome)
    assert line.get("discard", False) == ("--discard" in argv)
    assert line.get("apply", False) == ("--apply" in argv)


def test_help_and_version_are_not_commands(configured: Path) -> None:
    assert wp("--help") == 0 and wp("--version") == 0 and wp("writer", "--help") == 0
    assert lines() == []


def test_an_unsafe_writer_name_never_reaches_the_log(configured: Path) -> None:
    wp("writer", "remove", "x\n{injected}")
    [line] = lines()
    assert (
        line["writer"] == "<refused>" and "injected" not in Paths.from_env().audit_log.read_text()
    )


def test_a_warm_claim_line_carries_the_verdict_digest_and_fingerprint_or_refuses_them() -> None:
    verdict, fingerprint = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    claimed = warm_line("warm_claim", "writer_warm_claimed", "ws-w1", session="s-1",
                        host="local", verdict_digest=verdict, fingerprint=fingerprint)  # fmt: skip
    line = json.loads(claimed)
    assert (line["action"], line["outcome"], line["writer"], line["session"], line["host"]) == (
        "warm_claim", "writer_warm_claimed", "ws-w1", "s-1", "local"
    )  # fmt: skip
    assert (line["verdictDigest"], line["fingerprint"]) == (verdict, fingerprint)
    bad = warm_line("warm_claim", "writer_warm_claimed", "ws-w1",
                    verdict_digest="sha256:x\n", fingerprint="/etc/passwd")  # fmt: skip
    forged = json.loads(bad)
    assert (forged["verdictDigest"], forged["fingerprint"]) == ("<refused>", "<refused>")
    recycled = json.loads(warm_line("warm_recycle", "writer_acceptance_stale", "ws-w1"))
    assert recycled["outcome"] == "writer_acceptance_stale" and "fingerprint" not in recycled
