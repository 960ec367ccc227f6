"""A watchdog on an egress loop's thread: a signal ends any kernel wait it is held in.

The writer can make the kernel hold the loop's thread without any call of the proxy's
that blocks: a TCP socket it sends with SO_LINGER set, its own copy closed and bytes
queued towards a peer that never reads, lingers in whichever thread drops the last
reference to it. That is the proxy's close of a handed socket, but also a recvmsg()
that receives more descriptors than it has room for (the kernel drops the rest in the
receiving thread), a recv() without room for any, and the close of a Unix connection
with descriptors still queued on it: no call on a writer's socket is safe from it, and
O_NONBLOCK does not matter. The linger ends when the waiting thread has a signal
pending. So the loop beats every BEAT seconds, and a thread of its own sends SIGNAL to
the loop's thread whenever the last beat is older than STUCK: a close that lingers
ends then (the kernel carries on closing it in the background), and the loop goes on.
Each such connection costs the loop at most STUCK and a beat, and only the session's
own egress process (`egress.worker`) runs its loop.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time

# Ignored by default: where no handler is set (`arm` off the main thread), sending it
# does nothing at all, and nothing else in the process uses it.
SIGNAL = signal.SIGURG
BEAT = 0.2
STUCK = 0.5


def arm() -> None:
    """Give SIGNAL a handler of its own, from the main thread (a no-op elsewhere): an
    ignored signal is dropped when it is sent and ends no wait."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(SIGNAL, _woken)


def _woken(signum: int, frame: object) -> None:
    del signum, frame  # the interrupted wait has ended; nothing else to do


def watch(loop: asyncio.AbstractEventLoop) -> threading.Event:
    """Watch `loop` from now on (call on its own thread); set the returned event to stop."""
    target = threading.get_ident()
    stopped = threading.Event()
    beats = [time.monotonic()]

    def beat() -> None:
        beats[0] = time.monotonic()
        if not stopped.is_set():
            loop.call_later(BEAT, beat)

    def guard() -> None:
        while not stopped.wait(BEAT):  # bounded: until stopped
            if time.monotonic() - beats[0] > STUCK:
                try:
                    signal.pthread_kill(target, SIGNAL)
                except (ProcessLookupError, OSError):
                    return  # the loop's thread has ended

    loop.call_soon(beat)
    threading.Thread(target=guard, name="egress-watchdog", daemon=True).start()
    return stopped
