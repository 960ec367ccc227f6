"""The payload (writerpool/payload/: what the writer image runs) and the host agree without
the host importing it: what both sides must share is written on each side, and these
tests hold the two copies together. The payload itself imports nothing of writerpool."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from writerpool import tree_removal
from writerpool.egress import clienthello, connect_model
from writerpool.gitops import git_snapshot
from writerpool.payload.clonetool import gitsnap, provision, storage, stream
from writerpool.payload.harness import tls
from writerpool.pool.collect import stream as collect_stream
from writerpool.pool.provision import stream as provision_stream
from writerpool.pool.writer import inspect
from writerpool.runtime.image_tools import PACKAGE_DIR

PAYLOAD = PACKAGE_DIR / "payload"


def _code(path: Path) -> str:
    """A module's code without its docstring (each copy says which one it is)."""
    tree = ast.parse(path.read_text(), str(path))
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def test_the_host_removes_agent_trees_with_the_same_code_as_the_payload() -> None:
    host = Path(tree_removal.__file__)
    assert _code(host) == _code(PAYLOAD / "clonetool" / "removal.py")


@pytest.mark.parametrize(
    ("host", "payload"),
    [
        (provision_stream.REQUEST_VAR, provision.REQUEST_VAR),
        (inspect.STORAGE_ROOT, storage.ROOT),
        (collect_stream.CHUNK_MAX, stream.CHUNK),
        (git_snapshot.MAX_ENTRIES, gitsnap.MAX_ENTRIES),
    ],
    ids=["request variable", "storage root", "stream chunk", "snapshot entries"],
)
def test_the_wire_constants_agree(host: object, payload: object) -> None:
    assert host == payload


def test_the_payload_imports_only_itself_and_the_standard_library() -> None:
    outside = []
    modules = sorted(PAYLOAD.rglob("*.py"))
    for module in modules:  # bounded by the payload's modules
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.split(".")[0] not in sys.stdlib_module_names:
                    outside.append(f"{module.relative_to(PAYLOAD)}: {name}")
    assert len(modules) > 10, "the scan no longer sees the payload"
    assert outside == []


def test_the_harness_reads_each_refused_hello_alert_as_the_proxy_means_it() -> None:
    reasons = (clienthello.SNI_MISMATCH, clienthello.SNI_MISSING, clienthello.HELLO_TOO_LARGE)
    read = [tls.alert_reason(connect_model.hello_alert(reason)) for reason in reasons]
    assert read == ["sni_mismatch", "sni_missing", "access_denied"]
    assert tls.alert_reason(b"HTTP/1.1 200 OK\r\n") is None
