"""Acceptance: the harness run in a writer's exact container, the isolation control it is
judged against, and the harness's typed report."""
