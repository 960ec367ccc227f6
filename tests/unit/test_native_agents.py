"""The pins of Claude Code and Codex: npm's lock checked against them, the staged layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from writerpool.agent import native
from writerpool.errors import WriterpoolError


def _lock(
    machine: str = "x86_64", changes: dict[str, dict[str, str]] | None = None
) -> dict[str, object]:
    """npm's package-lock.json as `npm install` of the pinned packages writes it."""
    packages: dict[str, dict[str, str]] = {"": {}}
    for pin in native.wanted(machine):
        packages[f"node_modules/{pin.package}"] = {
            "version": pin.version, "integrity": pin.integrity,
        }  # fmt: skip
    for package, entry in (changes or {}).items():
        packages[f"node_modules/{package}"].update(entry)
    return {"lockfileVersion": 3, "packages": packages}


def _prefix(tmp_path: Path, lock: dict[str, object], machine: str = "x86_64") -> Path:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "package-lock.json").write_text(json.dumps(lock))
    for name, path in native.sources(prefix, machine).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"binary {name}".encode())
    return prefix


def test_the_pinned_lock_passes() -> None:
    for machine in ("x86_64", "aarch64"):
        assert native.lock_mismatches(_lock(machine), native.wanted(machine)) == []


@pytest.mark.parametrize(
    ("package", "entry", "says"),
    [
        ("@anthropic-ai/claude-code", {"integrity": "sha512-AAAA"}, "another integrity"),
        ("@anthropic-ai/claude-code-linux-x64", {"integrity": "sha512-AAAA"}, "another integrity"),
        ("@openai/codex", {"version": "0.172.0"}, "'0.172.0', pinned 0.171.0"),
        ("@openai/codex-linux-x64", {"integrity": "sha1-AAAA"}, "another integrity"),
    ],
)
def test_a_package_unlike_its_pin_is_named(package: str, entry: dict[str, str], says: str) -> None:
    problems = native.lock_mismatches(_lock(changes={package: entry}), native.wanted("x86_64"))
    assert len(problems) == 1 and problems[0].startswith(package) and says in problems[0]


def test_a_missing_package_or_lock_is_a_mismatch(tmp_path: Path) -> None:
    lock = _lock()
    packages = lock["packages"]
    assert isinstance(packages, dict)
    del packages["node_modules/@openai/codex-linux-x64"]
    assert native.lock_mismatches(lock, native.wanted("x86_64")) == [
        "@openai/codex-linux-x64 is not installed"
    ]
    assert native.lock_mismatches({}, native.wanted("x86_64")) == ["npm's lock has no packages"]
    with pytest.raises(WriterpoolError) as caught:
        native.check_pins(tmp_path, "x86_64")  # no package-lock.json at all
    assert caught.value.code == "agent_pin_mismatch"


def test_a_mismatch_is_refused_and_nothing_is_staged(tmp_path: Path) -> None:
    bad = _lock(changes={"@anthropic-ai/claude-code-linux-x64": {"integrity": "sha512-AAAA"}})
    prefix = _prefix(tmp_path, bad)
    assert not native.installed(prefix, "x86_64")
    context = tmp_path / "context"
    with pytest.raises(WriterpoolError) as caught:
        native.stage(prefix, context, "x86_64")
    assert caught.value.code == "agent_pin_mismatch"
    assert "@anthropic-ai/claude-code-linux-x64 2.1.332 has another integrity" in (
        caught.value.message
    )
    assert not context.exists()


def test_staging_copies_only_the_binaries_in_their_layout(tmp_path: Path) -> None:
    prefix = _prefix(tmp_path, _lock())
    voice = native.sources(prefix, "x86_64")["codex/bin/codex"].parents[1] / "codex-resources"
    (voice / "voice").mkdir(parents=True)
    (voice / "voice" / "model.bin").write_bytes(b"not needed")
    assert native.installed(prefix, "x86_64")
    context = native.stage(prefix, tmp_path / "context", "x86_64")
    staged = sorted(str(p.relative_to(context)) for p in context.rglob("*") if not p.is_dir())
    assert staged == [
        "bin/codex", "claude/claude",
        "codex/bin/codex", "codex/bin/codex-code-mode-host", "codex/codex-package.json",
        "codex/codex-path/rg", "codex/codex-resources/bwrap",
    ]  # fmt: skip
    assert (context / "claude/claude").read_bytes() == b"binary claude/claude"
    assert (context / "bin/codex").readlink() == Path("/opt/codex/bin/codex")


def test_an_unknown_machine_is_refused() -> None:
    with pytest.raises(WriterpoolError) as caught:
        native.wanted("riscv64")
    assert caught.value.code == "image_build_failed"


def test_an_image_labels_its_agent_versions() -> None:
    labels = {"io.writerpool.pi": "0.73.1", "io.writerpool.agents": native.pins_text()}
    assert native.image_versions(labels) == {"pi": "0.73.1", "claude": "2.1.332",
                                             "codex": "0.171.0"}  # fmt: skip
    assert native.image_versions({}) == {}
