"""The commented starter config.toml written by `writerpool config init`."""

STARTER = """\
# writerpool configuration. Only writerpool reads this file; it is never
# taken from the current directory or from a checkout.

[workspaces]
# alias = "absolute path of a git checkout"
# demo = "/home/me/src/demo"

# Exactly one profile is the default, and it must be read-only.
[profiles.review]
permission = "read-only"
provider = "anthropic"
model = "claude-sonnet-4-5"
thinking = "medium"          # off|minimal|low|medium|high|xhigh
default = true

[profiles.code]
permission = "coding"
provider = "anthropic"
model = "claude-sonnet-4-5"
thinking = "high"

# A provider pi does not know itself (an OpenAI-compatible endpoint).
# The key is read from the named environment variable at session start.
# [providers.local]
# base_url = "http://127.0.0.1:8080/v1"
# api_key_env = "LOCAL_API_KEY"

# [pool]
# lease_wait_seconds = 10    # how long an operator command waits for a busy writer
# memory = "4g"              # per-session limits, where the host's cgroups allow them
# cpus = 2
# pids = 1024
"""
