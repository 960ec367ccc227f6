"""A 200 KB answer in 4-character deltas completes in every placement: pi on the host,
pi in a read-only session's container (here), and pi in a writer
(test_container_sessions.py). Without the Node preload pi dies with `write ENOBUFS`."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import LONG_TEXTS, MakeServer
from tests.e2e.harness import connect

pytestmark = [pytest.mark.pi]

PAGE = 64 * 1024


@pytest.mark.parametrize(
    ("profile", "placement"),
    [
        pytest.param("code", "host", id="host"),
        pytest.param(
            "review", "readonly_container", id="readonly",
            marks=[pytest.mark.podman, pytest.mark.image],
        ),
    ],
)  # fmt: skip
def test_a_200_kb_answer_in_small_deltas_completes(
    make_server: MakeServer, pi_prefix: Path, image_pin: Path, profile: str, placement: str
) -> None:
    server = make_server(pi_prefix)
    text = LONG_TEXTS["answer-200k"]

    async def scenario() -> None:
        async with connect(server) as client:
            start = {"workspace": "hosted", "executionProfile": profile}
            session = (await client.ok("pi_session_start", start))["session"]
            assert session["placement"] == placement
            sid = session["sessionId"]
            prompt = {"sessionId": sid, "message": "answer-200k"}
            body = await client.ok("pi_session_prompt", prompt)
            turn = await client.wait_turn(sid, body["turnId"], limit=300)
            assert turn["status"] == "completed", turn
            shown = {k: v for k, v in turn.items() if k != "text"}
            print(f"\n{placement}: {shown}, text[:32]={turn['text'][:32]!r}")
            assert text.startswith(turn["text"]) and turn["textLength"] == PAGE
            rest = await client.ok(
                "pi_turn_get",
                {"sessionId": sid, "turnId": body["turnId"], "offset": PAGE - 4096, "limit": 4096},
            )
            assert rest["turn"]["text"] == text[PAGE - 4096 : PAGE]
            await client.ok("pi_session_close", {"sessionId": sid})

    anyio.run(scenario)
