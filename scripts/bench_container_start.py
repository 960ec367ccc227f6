"""What a session container's start costs, flag group by flag group.

One run, alternating order: `podman run --rm IMAGE true` bare, with each of the writer
spec's flag groups added alone, and with the full argv writer_spec builds; then pi
from exec to its first RPC answer on the host, in a bare container, and in the full
writer container with and without the egress forwarder as PID 1.

Usage (as the operator account, from the tree): python scripts/bench_container_start.py
[--reps N]. Prints the median and the spread of each; writes nothing of the operator's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
if str(TOP) not in sys.path:
    sys.path.insert(0, str(TOP))

from writerpool.agent import launch as agent_launch  # noqa: E402
from writerpool.agent.environment import HOST, pi_env  # noqa: E402
from writerpool.agent.install import install_pi  # noqa: E402
from writerpool.config.models import Profile, Provider  # noqa: E402
from writerpool.config.paths import Paths  # noqa: E402
from writerpool.pool.writer.container import AGENT_DIR  # noqa: E402
from writerpool.runtime.image import image_setting_id  # noqa: E402
from writerpool.runtime.spec import AGENT_HOME, ContainerSpec, Limits, Mount  # noqa: E402

PROFILE = Profile(permission="coding", provider="scripted", model="m", thinking="off")
PROVIDER = Provider(
    base_url="http://127.0.0.1:9/v1", container_base_url="http://127.0.0.1:41480/v1"
)
TRUE = ["true"]
PI_ARGS = agent_launch.pi_args(
    PROFILE, False, AGENT_DIR, session_dir=agent_launch.CONTAINER_SESSION_DIR
)


def podman_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}


def run_true(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(["podman", *argv], env=podman_env(), check=True, capture_output=True)
    return time.perf_counter() - started


def first_answer(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Exec argv (pi in RPC mode), ask get_state, time the answer's arrival."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b'{"id":"1","type":"get_state"}\n')
        proc.stdin.flush()
        while True:  # bounded by pi's output until its answer or EOF
            line = proc.stdout.readline()
            if not line:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"bench: pi exited before answering: {argv[:3]} {err[-400:]}")
            if json.loads(line).get("type") == "response":
                return time.perf_counter() - started
    finally:
        proc.stdin.close() if proc.stdin else None
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def writer_like(root: Path, image_id: str, egress: bool, name: str) -> ContainerSpec:
    """A spec shaped as pool/container.writer_spec builds it, on a scratch clone."""
    clone = root / "clone"
    for sub in ("hooks",):
        (clone / ".git" / sub).mkdir(parents=True, exist_ok=True)
    (clone / ".git" / "config").touch()
    agent = root / "agent"
    agent_launch.render_agent_dir(agent, "scripted", PROVIDER, True, ["m"])
    (root / "egress").mkdir(exist_ok=True)
    mounts = [
        Mount(source=clone, target="/work"),
        Mount(source=clone / ".git", target="/work/.git"),
        Mount(source=clone / ".git" / "config", target="/work/.git/config", read_only=True),
        Mount(source=clone / ".git" / "hooks", target="/work/.git/hooks", read_only=True),
        Mount(source=agent, target=AGENT_DIR, read_only=True),
    ]
    if egress:
        mounts.append(Mount(source=root / "egress", target="/pi/egress", read_only=True))
    env = pi_env(AGENT_DIR, "provider" if egress else "none", writer="w1")
    labels = {f"io.writerpool.{k}": "bench" for k in ("writer", "workspace", "settings", "role")}
    return ContainerSpec(
        image_id=image_id, name=name, labels=labels, mounts=tuple(mounts), env=env,
        network="none", limits=Limits(memory="4g", cpus=2.0, pids=1024),
    )  # fmt: skip


def flag_groups(spec: ContainerSpec) -> dict[str, list[str]]:
    full = spec.run_argv(TRUE)
    mounts = [a for m in spec.mounts for a in m.argv()]
    labels = [a for k, v in spec.labels.items() for a in ("--label", f"{k}={v}")]
    env = [a for k, v in spec.env.items() for a in ("--env", f"{k}={v}")]
    return {
        "bare": [],
        "userns": ["--userns=keep-id"],
        "caps": ["--cap-drop=all", "--security-opt=no-new-privileges"],
        "readonly": ["--read-only", "--read-only-tmpfs=false",
                     "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777",
                     "--tmpfs", f"{AGENT_HOME}:rw,nosuid,nodev,mode=1777"],
        "net_log": ["--network", "none", "--hostname", "writer", "--log-driver=none"],
        "mounts": mounts,
        "labels_env": labels + env,
        "limits": ["--memory", "4g", "--cpus", "2.0", "--pids-limit", "1024"],
        "full": full[: full.index(spec.image_id)][1:],  # minus "run"
    }  # fmt: skip


def measure(cases: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for rep in range(reps):  # reps x cases runs; order flips every repetition
        for name in names if rep % 2 == 0 else reversed(names):
            samples[name].append(cases[name]())
    return samples


def report(title: str, samples: dict[str, list[float]], base: str) -> None:
    print(f"\n{title}  (median s, min-max; ratio to {base})")
    ref = statistics.median(samples[base])
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"  {name:<18} {med:6.3f}  ({min(values):.3f}-{max(values):.3f})  {med / ref:5.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--only", choices=["true", "pi"], default=None)
    parser.add_argument("--compare", metavar="IMAGE_ID", help="also pi in this image's writer")
    args = parser.parse_args()
    paths = Paths.from_env()
    image_id = image_setting_id(paths, "default")
    pi = install_pi(paths.pi_prefix)
    with tempfile.TemporaryDirectory(prefix="writerpool-cstart-") as tmp:
        root = Path(tmp)
        print(f"image {image_id[:12]}  load {os.getloadavg()}")
        if args.only in (None, "true"):
            spec = writer_like(root / "t", image_id, True, "wp-cstart-true")
            groups = flag_groups(spec)
            cases = {
                name: (
                    lambda f=flags: run_true(["run", "--rm", "--pull=never", *f, image_id, *TRUE])
                )
                for name, flags in groups.items()
            }
            report("podman run --rm IMAGE true", measure(cases, args.reps), "bare")
        if args.only in (None, "pi"):
            cases = pi_cases(root, image_id, pi)
            if args.compare:
                other = writer_like(root / "c", args.compare, True, "wp-cstart-cmp")
                argv = ["podman", *other.run_argv(["pi", *PI_ARGS], interactive=True)]
                cases[f"writer_full_{args.compare[:12]}"] = lambda: first_answer(
                    argv, podman_env(), root
                )
            report("exec to pi's first RPC answer", measure(cases, args.reps), "host")
        print(f"load {os.getloadavg()}")
    return 0


def pi_cases(root: Path, image_id: str, pi: Path) -> dict[str, Callable[[], float]]:
    pargs = PI_ARGS
    host_agent, host_tmp = root / "host" / "agent", root / "host" / "tmp"
    host_tmp.mkdir(parents=True)
    agent_launch.render_agent_dir(host_agent, "scripted", PROVIDER, False, ["m"])
    host_env = pi_env(host_agent, HOST, tmpdir=host_tmp)
    with_fwd = writer_like(root / "f", image_id, True, "wp-cstart-fwd")
    no_fwd = writer_like(root / "n", image_id, False, "wp-cstart-nofwd")
    # keep-id: pi refuses to run as a root that could read its execute-only node.
    bare = ["podman", "run", "--rm", "-i", "--pull=never", "--userns=keep-id",
            "--mount", f"type=bind,src={root / 'f' / 'agent'},dst={AGENT_DIR},ro=true",
            *[a for k, v in pi_env(AGENT_DIR, "none").items() for a in ("--env", f"{k}={v}")],
            image_id, "pi", *pargs]  # fmt: skip
    cwd = root
    env = podman_env()
    return {
        "host": lambda: first_answer([str(pi), *pargs], host_env, cwd),
        "bare_container": lambda: first_answer(bare, env, cwd),
        "writer_no_fwd": lambda: first_answer(
            ["podman", *no_fwd.run_argv(["pi", *pargs], interactive=True)], env, cwd),
        "writer_full": lambda: first_answer(
            ["podman", *with_fwd.run_argv(["pi", *pargs], interactive=True)], env, cwd),
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
