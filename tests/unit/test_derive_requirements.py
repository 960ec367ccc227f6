"""What `image derive --requirements` hands to pip, decided before pip starts: plain
requirements re-rendered, every other line refused by number; pip's environment and
argv; the wheel manifest that names the build step, so other wheels make another image."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.images.derive import derive_source
from writerpool.runtime.image_derive import derived_key, wheels_containerfile
from writerpool.runtime.image_wheels import (
    GUARD_EXIT,
    PIP_GUARD,
    Wheel,
    Wheelhouse,
    fetch_env,
    hash_wheelhouse,
    pip_argv,
)
from writerpool.runtime.requirements import RequirementsRefused, parse_requirements

SHA = "ab" * 32


def _refusal(text: str) -> str:
    with pytest.raises(RequirementsRefused) as info:
        parse_requirements(text)
    assert info.value.code == "image_requirement_refused"
    assert info.value.exit_code == 2, "bad input is a usage error"
    return info.value.message


def test_plain_requirements_are_rendered_one_per_line_for_pip() -> None:
    text = (
        "\ufeff# made by a lock tool\n"
        "tinycalc==0.1 \\\n"
        f"    --hash=sha256:{SHA.upper()} \\\n"
        f"    --hash sha256:{SHA}\n"
        "    # via -r requirements.in\n"
        'Foo[Bar,baz] >=1.0, <2 ; python_version >= "3.8"  # a comment\n'
        "\n"
        "plain\n"
    )
    assert parse_requirements(text).lines == (
        f"tinycalc==0.1 --hash=sha256:{SHA} --hash=sha256:{SHA}",
        'Foo[Bar,baz]<2,>=1.0; python_version >= "3.8"',
        "plain",
    )
    assert parse_requirements("a\nb==2\n").render() == "a\nb==2\n"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("--no-binary :all:", "an option line (--no-binary)"),
        ("--no-binary=:all:", "an option line (--no-binary)"),
        ("-i http://127.0.0.1:9/simple", "an option line (-i)"),
        ("--index-url=http://127.0.0.1:9/simple", "an option line (--index-url)"),
        ("-e .", "an option line (-e)"),
        ("-r other.txt", "an option line (-r)"),
        ("-c constraints.txt", "an option line (-c)"),
        ("--find-links /srv/wheels", "an option line (--find-links)"),
        ("--pre", "an option line (--pre)"),
        ("evil @ file:///srv/evil", "a direct reference"),
        ("evil@ http://127.0.0.1:9/evil-1.0.tar.gz", "a direct reference"),
        ("evil @ git+https://git.test/evil", "a direct reference"),
        ("./evil", "not a requirement"),
        ("/srv/evil", "not a requirement"),
        ("http://127.0.0.1:9/evil-1.0.tar.gz", "not a requirement"),
        ("evil-1.0.tar.gz", "a file name"),
        ("evil-1.0-py3-none-any.whl", "a file name"),
        ("evil.zip", "a file name"),
        ("evil==1 --config-settings=x=y", "the option --config-settings"),
        ("evil==1 --global-option=--x", "the option --global-option"),
        ("evil==1 -C x=y", "the option -C"),
        ("evil==1 --hash=md5:abcd", "a --hash that is not"),
        ("evil==1 --hash=sha256:abcd", "a --hash that is not"),
        ("evil==1 --hash", "a --hash that is not"),
        ("evil===${HOME}", "a character pip would read otherwise"),
        ("evil; extra == '${X}'", "a character pip would read otherwise"),
    ],
)
def test_each_kind_of_line_pip_could_build_or_redirect_with_is_refused(line: str, why: str) -> None:
    message = _refusal(f"fine==1\n{line}\n")
    assert f"line 2 `{line}`: {why}" in message, message
    assert "before pip ran" in message


def test_every_refused_line_is_named_with_its_number_and_escaped_text() -> None:
    text = "ok==1\n--no-binary :all:\nnice\\\n  @ file:///x\n\x1b]0;title\x07bad\n./" + "y" * 300
    message = _refusal(text)
    assert "4 refused line(s)" in message
    assert "line 2 `--no-binary :all:`" in message
    assert "line 3 `nice  @ file:///x`: a direct reference" in message  # joined, first line
    assert "\x1b" not in message and "line 5 `\\x1b]0;title\\x07bad`" in message
    assert "line 6 `./" + "y" * 77 + "…`" in message


def test_a_refused_url_is_shown_without_its_user_and_password() -> None:
    message = _refusal("-i https://user:s3cret@mirror.test/simple\nx @ https://tok@h.test/x.whl\n")
    assert "s3cret" not in message and "tok" not in message
    assert "line 1 `-i https://mirror.test/simple`" in message
    assert "line 2 `x @ https://h.test/x.whl`" in message


def test_a_file_that_names_no_requirement_is_refused() -> None:
    assert "names no requirement" in _refusal("# only a comment\n\n")


def test_derive_source_checks_the_file_before_anything_runs(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("--no-binary :all:\nevil\n")
    with pytest.raises(UsageError) as info:
        derive_source(None, None, req)
    assert info.value.code == "image_requirement_refused"
    req.write_bytes(b"caf\xe9\n")
    with pytest.raises(UsageError) as info:
        derive_source(None, None, req)
    assert info.value.code == "image_requirement_refused" and "UTF-8" in info.value.message
    with pytest.raises(UsageError) as info:
        derive_source(None, None, tmp_path)
    assert info.value.code == "usage_invalid"
    req.write_text("tinycalc==0.1\n")
    made = derive_source(None, None, req)
    assert made.requirements is not None and made.requirements.lines == ("tinycalc==0.1",)


def test_pip_gets_only_the_hosts_fetch_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "PIP_INDEX_URL": "https://mirror.test/simple",
        "PIP_CERT": "/etc/ca.pem",
        "https_proxy": "http://proxy.test:3128",
        "PIP_REQUIREMENT": "/srv/more.txt",
        "PIP_CONSTRAINT": "/srv/c.txt",
        "PIP_EDITABLE": "/srv/evil",
        "PIP_NO_BINARY": ":all:",
        "PIP_SRC": "/srv",
    }.items():
        monkeypatch.setenv(key, value)
    env = fetch_env()
    assert env["PIP_INDEX_URL"] == "https://mirror.test/simple"
    assert env["PIP_CERT"] == "/etc/ca.pem" and env["https_proxy"] == "http://proxy.test:3128"
    kept = {k for k in env if k.startswith("PIP_")}
    assert kept.isdisjoint({"PIP_REQUIREMENT", "PIP_CONSTRAINT", "PIP_EDITABLE",
                            "PIP_NO_BINARY", "PIP_SRC"})  # fmt: skip


def test_pip_runs_binary_only_under_the_guard_on_the_rendered_file(tmp_path: Path) -> None:
    argv = pip_argv(["--python-version", "3.13"], tmp_path / "r.txt", tmp_path / "w")
    assert argv[:4] == [sys.executable, "-P", "-c", PIP_GUARD]
    assert argv[4] == "download" and "--only-binary=:all:" in argv
    assert argv[-2:] == ["--requirement", str(tmp_path / "r.txt")]
    # The hook is added before pip is imported, and a refusal ends pip with its own status.
    assert PIP_GUARD.index("sys.addaudithook(guard)") < PIP_GUARD.index('run_module("pip"')
    assert f"os._exit({GUARD_EXIT})" in PIP_GUARD
    compile(PIP_GUARD, "<guard>", "exec")


def _house(folder: Path, contents: dict[str, bytes]) -> Wheelhouse:
    folder.mkdir(parents=True)
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    return hash_wheelhouse(folder)


def test_the_wheelhouse_is_hashed_and_holds_only_wheels(tmp_path: Path) -> None:
    house = _house(tmp_path / "a", {"b-1-py3-none-any.whl": b"B", "a-1-py3-none-any.whl": b"A"})
    sha_a = hashlib.sha256(b"A").hexdigest()
    assert house.wheels[0] == Wheel(file="a-1-py3-none-any.whl", sha256=sha_a)
    assert house.manifest().splitlines()[0] == f"{sha_a}  a-1-py3-none-any.whl"
    for odd in ({"evil-1.0.tar.gz": b"x"}, {"not-a-wheel.whl": b"x"}, {}):
        with pytest.raises(WriterpoolError) as info:
            _house(tmp_path / str(len(list(tmp_path.iterdir()))), odd)
        assert info.value.code == "image_derive_failed"
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "a-1-py3-none-any.whl").symlink_to(tmp_path / "a" / "a-1-py3-none-any.whl")
    with pytest.raises(WriterpoolError):
        hash_wheelhouse(linked)


def test_other_wheels_make_another_build_step_and_key(tmp_path: Path) -> None:
    base = "b" * 64
    one = _house(tmp_path / "one", {"tinycalc-0.1-py3-none-any.whl": b"v0.1"})
    same = _house(tmp_path / "same", {"tinycalc-0.1-py3-none-any.whl": b"v0.1"})
    other = _house(tmp_path / "other", {"tinycalc-0.1-py3-none-any.whl": b"rebuilt"})
    first = wheels_containerfile(one)
    assert one.digest() in first and "sha256sum --check --strict" in first
    assert wheels_containerfile(same) == first
    assert derived_key(base, first) == derived_key(base, wheels_containerfile(same))
    # The same file name with other bytes changes the RUN step itself (Podman's cache key).
    run_step = [ln for ln in wheels_containerfile(other).splitlines() if one.digest() in ln]
    assert run_step == [] and derived_key(base, wheels_containerfile(other)) != derived_key(
        base, first
    )
    assert derived_key("c" * 64, first) != derived_key(base, first), "a new pin: a new image"
