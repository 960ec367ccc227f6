"""Refs read from the files themselves, so that names git would refuse are seen too."""

from __future__ import annotations

import os
import stat
from typing import Any

from .gitrun import GIT_DIR, HEX, ToolError, object_types

# The host's limit table (writerpool/gitops/limits.py), received with every request.
Limits = dict[str, int]


def _read_small(path: bytes, limit: int) -> bytes | None:
    """A regular file's bytes (bounded), or None when it is anything else."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        return None
    with open(path, "rb") as handle:
        return handle.read(limit + 1).rstrip(b"\r\n")


def _count(refs: dict[bytes, bytes], odd: dict[bytes, str], name: bytes, limits: Limits) -> None:
    if len(name) > limits["ref_name_bytes"]:
        raise ToolError("over cap: a ref name is longer than writerpool reads")
    if len(refs) + len(odd) > limits["refs"]:
        raise ToolError(f"over cap: the clone holds more than {limits['refs']} refs")


def _packed(refs: dict[bytes, bytes], odd: dict[bytes, str], limits: Limits) -> None:
    packed = os.path.join(GIT_DIR.encode(), b"packed-refs")
    if not os.path.lexists(packed):
        return
    st = os.lstat(packed)
    if not stat.S_ISREG(st.st_mode):
        raise ToolError("packed-refs is not a plain file")
    if st.st_size > limits["packed_refs_bytes"]:
        raise ToolError("over cap: packed-refs is larger than writerpool reads")
    with open(packed, "rb") as handle:
        for raw in handle:
            line = raw.rstrip(b"\r\n")
            if line and not line.startswith((b"#", b"^")):
                oid, _, name = line.partition(b" ")
                refs[name] = oid
                _count(refs, odd, name, limits)


def read_refs(limits: Limits) -> tuple[dict[bytes, bytes], dict[bytes, str]]:
    """Every ref as raw name -> raw value (loose over packed), and refs that are odd;
    more refs, or longer names, than `limits` allow is an error."""
    refs: dict[bytes, bytes] = {}
    odd: dict[bytes, str] = {}
    _packed(refs, odd, limits)
    top = os.path.join(GIT_DIR.encode(), b"refs")
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = os.path.relpath(dirpath, GIT_DIR.encode())
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                odd[os.path.join(rel_dir, name)] = "a linked directory"
        for name in filenames:
            rel = os.path.join(rel_dir, name)
            value = _read_small(os.path.join(dirpath, name), limits["ref_file_bytes"])
            if value is None:
                odd[rel] = "not a plain file"
            else:
                refs[rel] = value
            _count(refs, odd, rel, limits)
    return refs, odd


def _name(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _branch(raw: bytes) -> str:
    """A branch's name from its full ref name (undecodable bytes kept as surrogates)."""
    return _name(raw.removeprefix(b"refs/heads/"))


def branches(
    refs: dict[bytes, bytes], odd: dict[bytes, str], env: dict[str, str]
) -> list[dict[str, Any]]:
    """Branches under refs/heads/: name, commit, and what is wrong with it (if anything)."""
    heads = {k: v for k, v in refs.items() if k.startswith(b"refs/heads/")}
    types = object_types(sorted({v.decode() for v in heads.values() if HEX.fullmatch(v)}), env)
    found = []
    for raw, value in sorted(heads.items()):
        entry: dict[str, Any] = {"name": _branch(raw), "commit": None, "problem": None}
        if not HEX.fullmatch(value):
            entry["problem"] = "symbolic" if value.startswith(b"ref: ") else "malformed"
        elif types.get(value.decode()) != "commit":
            entry["problem"] = "not a commit"
        else:
            entry["commit"] = value.decode()
        found.append(entry)
    for raw, why in sorted(odd.items()):
        if raw.startswith(b"refs/heads/"):
            found.append({"name": _branch(raw), "commit": None, "problem": why})
    return found


def read_head(refs: dict[bytes, bytes]) -> tuple[str, str | None]:
    """HEAD's target ("refs/heads/x" or "detached") and its commit (None when unborn)."""
    value = _read_small(os.path.join(GIT_DIR.encode(), b"HEAD"), 4096)
    if value is None:
        raise ToolError("HEAD is not a plain file")
    if HEX.fullmatch(value):
        return "detached", value.decode()
    if not value.startswith(b"ref: "):
        raise ToolError("HEAD is malformed")
    target = value[5:].strip()
    commit = refs.get(target)
    return _name(target), commit.decode() if commit and HEX.fullmatch(commit) else None
