"""Collection and review: a writer's work exported as a bundle into the checkout, the refs it
imports or refuses, and what an operator reads before collecting (log, diff, review refs)."""
