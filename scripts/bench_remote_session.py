"""remote_session_start: a coding session's start (lease, agent directory, proxy, pi's
first answer) on a writer on a host over SSH, beside the same on a writer of this
machine, alternated in one run; and the close of each. Goal: remote at most local + 0.3 s.

    WRITERPOOL_TESTHOST_URL=… WRITERPOOL_TESTHOST_IDENTITY=… WRITERPOOL_TESTHOST_KNOWN_HOSTS=… \\
        python scripts/bench_remote_session.py [--reps N]

The remote writer is provisioned on the host by `provision` and recorded as accepted
under the current settings (acceptance does not run on other hosts yet); the local one
goes through `mode set --apply`. Uses the bench's private world (bench_env.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench_env import PROFILE, BenchEnv
from bench_remote import configured

from writerpool.config.models import load_config
from writerpool.config.modes import ContainerSettings, ModeEntry, load_modes, store_entry
from writerpool.gitops.base import resolve_base
from writerpool.pool.acceptance import current_fingerprint
from writerpool.pool.provision import provision
from writerpool.report import Report
from writerpool.runtime.host import writer_at
from writerpool.runtime.image_transfer import transfer_image
from writerpool.runtime.podman import PodmanHost
from writerpool.runtime.remote import connect
from writerpool.sessions.launch import Launcher
from writerpool.sessions.placement import plan_session
from writerpool.state.writer import save_state

GOAL_EXTRA = 0.3


def _remote_writer(env: BenchEnv, host_url: str) -> None:
    host = configured()
    assert host is not None
    ws = env.workspaces["rem"]
    settings = ContainerSettings(profiles=(PROFILE,), base="main", network="provider",
                                 writers=1, hosts=("th",))  # fmt: skip
    store_entry(env.paths, "rem", ModeEntry(mode="container", container=settings))
    pool = load_config(env.paths).config.pool
    pinned = json.loads(env.paths.image_pin_file.read_text())["imageId"]
    with connect("th", host) as remote:
        transfer_image(PodmanHost(), remote, pinned, lambda sent, total: None)
        state = provision(env.paths, remote, "rem", "rem-w1", ws.repo, settings,
                          resolve_base(ws.repo, "main"), Report("bench"), pool)  # fmt: skip
        ready = state.model_copy(update={"phase": "ready", "reason": None})
        ready = ready.model_copy(
            update={"fingerprint": current_fingerprint(env.paths, remote, ready, pool)}
        )
    save_state(env.paths.writer_dir("rem-w1"), ready)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    host = configured()
    if host is None:
        raise SystemExit("bench: needs WRITERPOOL_TESTHOST_* (scripts/testhost up)")
    env = BenchEnv.create()
    try:
        env.add_workspace("loc", 10, writers=1)
        env.add_workspace("rem", 10, writers=1)
        env.write_config()
        with env.paths.config_file.open("a") as out:
            out.write(f'\n[hosts.th]\nurl = "{host.url}"\nidentity = "{host.identity}"\n'
                      f'known_hosts = "{host.known_hosts}"\n')  # fmt: skip
        env.wp_ok("control", "--apply")
        env.set_container_mode("loc", "--network", "provider")
        _remote_writer(env, host.url)
        loaded = load_config(env.paths)
        modes = load_modes(env.paths)
        launcher = Launcher(env.paths, loaded)
        starts: dict[str, list[float]] = {"local": [], "remote": []}
        closes: dict[str, list[float]] = {"local": [], "remote": []}
        for n in range(args.reps):  # bounded by --reps
            for kind, alias in (("remote", "rem"), ("local", "loc")):
                plan = plan_session(loaded.config, modes, alias, PROFILE, None)
                began = time.perf_counter()
                launched = launcher.launch(plan, f"s-{kind}-{n}")
                starts[kind].append(time.perf_counter() - began)
                began = time.perf_counter()
                launcher.stop(launched, 10)
                closes[kind].append(time.perf_counter() - began)
        launcher.shutdown()
        for what, sample in (("session_start", starts), ("session_close", closes)):
            local, remote = (statistics.median(sample[k]) for k in ("local", "remote"))
            runs = " ".join(f"{v:.2f}" for v in sample["remote"])
            print(
                f"remote_{what}: remote {remote:.3f} s, local {local:.3f} s, "
                f"difference {remote - local:+.3f} s (medians of {args.reps}; remote {runs})"
            )
        extra = statistics.median(starts["remote"]) - statistics.median(starts["local"])
        print(
            f"goal: start at most local + {GOAL_EXTRA} s: {'met' if extra <= GOAL_EXTRA else 'missed'}"
        )
    finally:
        with connect("th", host) as remote:
            remote.remove_storage(writer_at(env.paths, "rem-w1", remote.name))
        env.close()


if __name__ == "__main__":
    main()
