"""Ends of a writer and of an install: reset, recreate, finish, remove, uninstall."""
