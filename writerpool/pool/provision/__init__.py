"""Writers made and named: provisioning a clone on its host, listing and addressing writers,
rebuilding a clone on its base, and the per-writer steps of reconciliation."""
