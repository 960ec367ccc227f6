"""What an operator reads of the pool: `writer status` and the pool's doctor checks."""
