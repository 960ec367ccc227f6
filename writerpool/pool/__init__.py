"""The pool: writers made, guarded, handed to sessions, collected and changed.

Its packages, each importing only those listed after it (pyproject's `pool` contract):
status and lifecycle; claims, collect, modes and images; provision; acceptance; writer.
"""
