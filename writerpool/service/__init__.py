"""The pool service: one long-lived process per user serving MCP over loopback HTTP."""
