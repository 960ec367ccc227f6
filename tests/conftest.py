"""Test isolation and the rule that, in CI, integration tests run rather than skip."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from writerpool.config.hosts import HostConfig
from writerpool.config.paths import Paths
from writerpool.runtime.remote import connect as connect_host
from writerpool.runtime.spec import LABEL_WRITER

# The operator account's real locations, read before any test redirects HOME and XDG_*:
# the writer image's pin and the installed pi live there.
REAL_PATHS = Paths.from_env()
REQUIRE = os.environ.get("WRITERPOOL_REQUIRE_PODMAN") == "1"
INTEGRATION_MARKERS = ("podman", "git", "pi", "image", "clients", "remote")


@pytest.fixture(autouse=True, scope="session")
def usual_umask() -> Iterator[None]:
    """Files the tests write get the usual modes whatever umask started them: a host's
    pin file others may write is refused (runtime/ssh_files.py)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME, XDG dirs, git identity and config under tmp_path; nothing from the real user."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("WRITERPOOL_CONFIG", str(home / ".config" / "writerpool" / "config.toml"))
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    for var, value in (
        ("GIT_AUTHOR_NAME", "Test"),
        ("GIT_AUTHOR_EMAIL", "test@example.invalid"),
        ("GIT_COMMITTER_NAME", "Test"),
        ("GIT_COMMITTER_EMAIL", "test@example.invalid"),
    ):
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("LC_ALL", "C")
    monkeypatch.delenv("WRITERPOOL_PODMAN", raising=False)
    monkeypatch.delenv("WRITERPOOL_PODMAN_SOCKET", raising=False)
    return home


# The test hosts scripts/test brings up (scripts/testhost), by the prefix of the variables
# that carry them: one on this machine's root file system and Podman, one on Debian 13's
# own with Podman 5.
TESTHOSTS = {"machine": "WRITERPOOL_TESTHOST", "debian13": "WRITERPOOL_TESTHOST5"}
# In CI every host runs (a missing one fails); elsewhere the Debian 13 one when it is up.
ALL_TESTHOSTS = bool(os.environ.get("CI") or os.environ.get("WRITERPOOL_TESTHOST5_URL"))


def _testhost(which: str, request: pytest.FixtureRequest) -> HostConfig:
    prefix = TESTHOSTS[which]
    url = os.environ.get(f"{prefix}_URL")
    if not url:
        pytest.skip(f"no {which} test host: run the tests through scripts/test as root")
    config = HostConfig(
        url=url,
        identity=Path(os.environ[f"{prefix}_IDENTITY"]),
        known_hosts=Path(os.environ[f"{prefix}_KNOWN_HOSTS"]),
    )
    # Only the remote tests' worker group may clear (the others may run meanwhile).
    if which not in _CLEARED and request.node.get_closest_marker("remote") is not None:
        _clear_writers(which, config)
        _CLEARED.add(which)
    return config


# The test hosts whose writers this test process removed (once each, before first use).
_CLEARED: set[str] = set()


def _clear_writers(which: str, config: HostConfig) -> None:
    """Remove every writer container and volume a run before this one left on a test
    host (a run killed mid-way): the tests' writer names repeat from run to run, and
    writerpool never takes storage a state of its own did not make. The test hosts'
    accounts are the tests' alone (scripts/testhost)."""
    label = f"label={LABEL_WRITER}"
    with connect_host(which, config) as remote:
        for listing, removal in (  # containers first: a volume in use stays
            (["ps", "--all", "--quiet", "--filter", label], ["rm", "--force", "--"]),
            (["volume", "ls", "--quiet", "--filter", label], ["volume", "rm", "--force", "--"]),
        ):
            names = remote.cli(listing, timeout=60).out.split()
            if names:  # bounded by what earlier runs left: a few writers' parts
                remote.cli([*removal, *names], timeout=300)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test marked every_testhost runs once per test host; the others on this machine's.
    if "testhost" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "every_testhost"
    ):
        hosts = list(TESTHOSTS) if ALL_TESTHOSTS else ["machine"]
        metafunc.parametrize("testhost", hosts, indirect=True)


@pytest.fixture
def testhost(request: pytest.FixtureRequest) -> HostConfig:
    """A second Podman host over SSH, as configured: the one on this machine's root file
    system, or for a test marked every_testhost each in turn."""
    return _testhost(getattr(request, "param", "machine"), request)


@pytest.fixture
def testhost5(request: pytest.FixtureRequest) -> HostConfig:
    """The test host on Debian 13's own root file system, with its Podman 5 and pasta."""
    return _testhost("debian13", request)


@pytest.fixture
def image_pin() -> Iterator[Path]:
    """Copy the operator's image pin into the test's state dir (the image is built once)."""
    if not REAL_PATHS.image_pin_file.exists():
        if REQUIRE:
            pytest.fail("the writer image is not built (run `writerpool image build`)")
        pytest.skip("the writer image is not built")
    paths = Paths.from_env()
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REAL_PATHS.image_pin_file, paths.image_pin_file)
    yield paths.image_pin_file


# Files that change what every test of the account shares: the local image store (builds,
# derived images, prunes that remove what no writer of *their* state uses) and the SSH test
# hosts (one account each, images transferred and pruned there, the account's ssh
# forwards counted); with them the files whose writers are named `demo-wN` (the alias of
# writers_support.write_config), as some of those are. They run one after another on one
# worker (`--dist loadgroup`).
SHARED_STORE = frozenset({
    "tests/integration/test_image_build.py", "tests/integration/test_image_derive.py",
    "tests/integration/test_image_prune.py", "tests/integration/test_derive_refusals.py",
    "tests/integration/test_writers.py", "tests/e2e/test_derived_image.py",
    "tests/e2e/test_daily_loop.py", "tests/integration/test_remove_reporting.py",
    "tests/integration/test_allow_acceptance.py", "tests/integration/test_agent_acceptance.py",
})  # fmt: skip
# Files whose local writers are named `boxed-wN` besides every test of the end-to-end
# server (`make_server`'s `boxed` workspace): a writer's container is `writerpool-ALIAS-wN`,
# global to the Podman account, and each test's state refuses (writer_name_taken) a
# writer name another test's state holds.
FIXED_NAMES = frozenset({"tests/e2e/test_wheel_install.py"})


def _group(item: pytest.Item) -> str:
    """The worker group of a test: its file's (a module's fixtures are made once), the
    group of what changes the shared image store or a test host, or the group of the
    `boxed` writers."""
    path = item.path.relative_to(item.config.rootpath).as_posix()
    if path in SHARED_STORE or "remote" in item.keywords:
        return "shared-store"
    if path in FIXED_NAMES or "make_server" in getattr(item, "fixturenames", ()):
        return "fixed-names"
    return path


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    if os.geteuid() != 0:
        return
    skip = pytest.mark.skip(reason="rootless Podman needs an unprivileged user")
    for item in items:
        if "podman" in item.keywords and not REQUIRE:
            item.add_marker(skip)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # The groups reach xdist's scheduler as a suffix of each node id, added by its worker
    # after the hook above: where that stops working the workers would mix silently.
    grouped = session.config.getoption("loadgroup", False)
    if grouped and session.items and "@" not in session.items[0].nodeid:
        pytest.exit("--dist loadgroup: the worker groups were not applied", returncode=4)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    # In CI a skipped integration test is a failure: it proves nothing.
    if REQUIRE and report.skipped and any(m in item.keywords for m in INTEGRATION_MARKERS):
        report.outcome = "failed"
        report.longrepr = (
            f"integration test skipped under WRITERPOOL_REQUIRE_PODMAN=1: {report.longrepr}"
        )
    return report


# Seconds spent per worker group (setup, call and teardown). A group runs on one worker
# after another, so the longest one bounds the whole run whatever the workers.
_group_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    group = report.nodeid.rpartition("@")[2] if "@" in report.nodeid else "(ungrouped)"
    _group_seconds[group] = _group_seconds.get(group, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    if _group_seconds:
        longest = sorted(_group_seconds.items(), key=lambda kv: -kv[1])[:5]
        terminalreporter.write_line(
            f"test seconds, all groups: {sum(_group_seconds.values()):.0f}; the longest: "
            + ", ".join(f"{name} {seconds:.0f}" for name, seconds in longest)
        )
    passed = terminalreporter.stats.get("passed", [])
    counts = {m: 0 for m in INTEGRATION_MARKERS}
    for rep in passed:
        for marker in INTEGRATION_MARKERS:
            if marker in rep.keywords:
                counts[marker] += 1
    summary = ", ".join(f"{m}: {n}" for m, n in counts.items())
    terminalreporter.write_line(f"integration tests that ran and passed: {summary}")
