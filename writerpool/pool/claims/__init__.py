"""A writer handed to a session: admission, the order writers are tried, refresh at lease,
the lease itself, warm writers, and read-only sessions' throwaway containers."""
