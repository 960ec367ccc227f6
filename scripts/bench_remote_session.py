"""remote_session_start: a coding session's start (lease, agent directory, proxy, pi's
first answer) on a writer on a host over SSH, beside the same on a writer of this
machine, alternated in one run; and the close of each. Goal: remote at most local + 0.3 s.

    WRITERPOOL_TESTHOST_URL=… WRITERPOOL_TESTHOST_IDENTITY=… WRITERPOOL_TESTHOST_KNOWN_HOSTS=… \\
        python scripts/bench_remote_session.py [--reps N]

Both writers go through `mode set --apply` (the remote one with `--hosts th`, after
`image transfer` and `control --host th`), so each is accepted on its own host. Uses the
bench's private world (bench_env.py).
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_env import PROFILE, BenchEnv
from bench_remote import configured

from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import connect
from writerpool.sessions.launch import Launcher
from writerpool.sessions.placement import plan_session

GOAL_EXTRA = 0.3


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
        # The remote writer is placed, provisioned and accepted on th as an operator does.
        env.wp_ok("image", "transfer", "--host", "th")
        env.wp_ok("control", "--host", "th", "--apply")
        env.set_container_mode("rem", "--network", "provider", "--hosts", "th")
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
