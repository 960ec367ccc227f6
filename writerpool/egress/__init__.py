"""Provider egress: the host-side proxy through which a writer reaches its provider.

Import the light parts freely (`model`, `sockets`); `writerpool.egress.proxy` imports
aiohttp, so import it only where a session actually opens a proxy.
"""
