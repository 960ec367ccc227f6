"""The MCP tool contract, owned by the session core: one pydantic model per tool gives its
published input schema, its validation and its types (arguments.py, refusals.py); the tool
table adds names, descriptions and hints (tools.py); the output schemas (outputs.py) and
the answer caps every body passes (answers.py). The transports in `mcp/` only carry it.
"""
