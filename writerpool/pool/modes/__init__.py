"""A workspace's settings: `mode show`, `mode set`'s plan and apply, the writers it replaces
or rebases, and the egress views of its allowlist."""
