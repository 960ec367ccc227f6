"""One writer: its container spec, its lease and fence, and what its clone holds (inspection,
verdicts, the work digest, the baseline). Everything else in the pool builds on these."""
