"""Each client's calls run on threads of its own, close and abort on a reserve of their
own, and waiting for a turn holds no thread: real threads, no processes."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from writerpool.sessions.seats import CLIENT_CALLS, ENDING_CALLS, Seats
from writerpool.sessions.waits import until_ended

# More threads than anyio's one shared pool holds (40): every client's calls took from it.
CLIENTS = 3
# A safety net only: each test passes at once or hangs without it.
STUCK = 60.0


def _blocked(gate: threading.Event, started: list[str], name: str) -> Callable[[], str]:
    def work() -> str:
        started.append(name)
        gate.wait()
        return name

    return work


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # bounded by the test's fail_after
        await anyio.sleep(0.01)


def test_a_client_at_its_cap_is_refused_and_others_are_not() -> None:
    async def scenario() -> None:
        seats = Seats()
        admitted = [seats.admit("a", "pi_turn_get", lambda: None) for _ in range(CLIENT_CALLS)]
        assert all(admitted)
        assert seats.admit("a", "pi_session_list", lambda: None) is None
        reserve = [seats.admit("a", "pi_session_close", lambda: None) for _ in range(ENDING_CALLS)]
        assert all(reserve)
        assert seats.admit("a", "pi_session_abort", lambda: None) is None
        assert seats.admit("b", "pi_session_list", lambda: None) is not None
        # Over stdio there is one client, never refused.
        assert all(seats.admit(None, "pi_turn_get", lambda: None, refuse=False)
                   for _ in range(CLIENT_CALLS * 2))  # fmt: skip

    anyio.run(scenario)


def test_clients_with_all_their_threads_busy_starve_no_other_client() -> None:
    """3 x 16 calls blocked in threads; a fourth client's call and each blocked client's
    close still run, while every blocked call still blocks."""

    async def scenario() -> None:
        seats, gate, started = Seats(), threading.Event(), list[str]()
        done: list[str] = []

        async def one(client: str, tool: str, work: Callable[[], str]) -> None:
            call = seats.admit(client, tool, lambda: None)
            assert call is not None
            async with call:
                done.append(await call.in_thread(work))

        with anyio.fail_after(STUCK):
            async with anyio.create_task_group() as tg:
                for c in range(CLIENTS):
                    for i in range(CLIENT_CALLS):
                        name = f"wait-{c}-{i}"
                        tg.start_soon(one, f"c{c}", "pi_turn_get", _blocked(gate, started, name))
                await _until(lambda: len(started) == CLIENTS * CLIENT_CALLS)
                await one("other", "pi_session_list", lambda: "list")
                for c in range(CLIENTS):
                    await one(f"c{c}", "pi_session_close", lambda: "close")
                assert done == ["list", "close", "close", "close"]  # no blocked call ended
                gate.set()
        assert len(done) == 4 + CLIENTS * CLIENT_CALLS
        assert all(seats.running(f"c{c}") == 0 for c in range(CLIENTS))

    anyio.run(scenario)


def test_a_step_cancelled_before_its_thread_began_never_runs_and_frees_its_seat() -> None:
    async def scenario() -> None:
        seats, gate, started = Seats(), threading.Event(), list[str]()
        ended: list[str] = []

        async def one(name: str) -> None:
            call = seats.admit("a", "pi_session_close", lambda: ended.append(name))
            assert call is not None
            async with call:
                await call.in_thread(_blocked(gate, started, name))

        queued = anyio.CancelScope()

        async def cancelled_while_queued() -> None:
            with queued:
                await one("queued")  # waits for a token of the reserve

        with anyio.fail_after(STUCK):
            async with anyio.create_task_group() as tg:
                for i in range(ENDING_CALLS):
                    tg.start_soon(one, f"close-{i}")
                await _until(lambda: len(started) == ENDING_CALLS)
                tg.start_soon(cancelled_while_queued)
                await _until(lambda: seats.running("a") == ENDING_CALLS + 1)
                queued.cancel()
                await _until(lambda: ended == ["queued"])  # never begun: its seat is free
                assert seats.running("a") == ENDING_CALLS
                tg.cancel_scope.cancel()  # the callers leave; their four threads run on
            assert seats.running("a") == ENDING_CALLS and ended == ["queued"]
            gate.set()
            await _until(lambda: seats.running("a") == 0)  # freed as each thread ends
        assert "queued" not in started
        assert sorted(ended) == [*(f"close-{i}" for i in range(ENDING_CALLS)), "queued"]

    anyio.run(scenario)


@pytest.mark.parametrize("ends", [True, False])
def test_waiting_for_a_turn_holds_no_thread_and_forgets_its_wake(ends: bool) -> None:
    wakes: list[Callable[[], None]] = []
    forgotten: list[bool] = []

    def watch(wake: Callable[[], None]) -> Callable[[], None]:
        wakes.append(wake)
        return lambda: forgotten.append(True)

    async def scenario() -> bool:
        # Every worker thread of anyio's own pool is taken: a wait that needed one hangs.
        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = 1
        result: list[bool] = []

        async def wait() -> None:
            result.append(await until_ended(watch, STUCK if ends else 0.5))

        with anyio.fail_after(STUCK):
            async with threads, anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await _until(lambda: bool(wakes))
                if ends:  # woken from another thread, as pi's reader thread does
                    threading.Thread(target=wakes[0]).start()
        return result[0]

    assert anyio.run(scenario) is ends
    assert forgotten == [True]
