"""A session's egress process logs the first unhandled error of its loop and counts the
rest: an agent that can make a connection's task fail can make it fail without end,
and the process writes on the server's own stderr."""

from __future__ import annotations

import asyncio
import logging

import pytest

from writerpool.egress.worker import LoopErrors


def test_only_the_first_loop_error_is_logged_and_the_rest_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise ValueError("an agent's doing")

    async def many() -> None:
        loop = asyncio.get_running_loop()
        errors = LoopErrors()
        loop.set_exception_handler(errors)
        for _ in range(200):
            task = loop.create_task(fail())
            await asyncio.sleep(0)
            loop.call_exception_handler({"message": "Task exception was never retrieved",
                                         "exception": task.exception(), "task": task})  # fmt: skip
        errors.summary()

    with caplog.at_level(logging.WARNING):
        asyncio.run(many())
    logged = [r for r in caplog.records if r.name == "asyncio"]
    assert len(logged) == 1 and "never retrieved" in logged[0].getMessage()
    assert "200 errors in the session's proxy in all" in caplog.text
