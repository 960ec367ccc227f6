"""Provider egress: the host-side proxy through which a writer reaches its provider.

Each session's listeners run in a process of their own (`worker`), started and
stopped by the server's `host`; `proxy` and `gate` run only inside that process
(they import aiohttp). `model`, `spec` and `sockets` are light and shared.
"""
