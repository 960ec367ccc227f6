"""The program writerpool runs inside throwaway writer containers (`python3 -m clonetool`).

It uses the standard library only and never imports writerpool: it runs in the writer
image, against the clone mounted at /work. Input is one JSON object on stdin, output one
JSON object on stdout.

`inspect` reads the clone (mounted read-only) and changes nothing in it: git runs with
--no-optional-locks, a temporary index and a temporary object directory under /tmp that
borrows the clone's objects as alternates. Refs are read from the files themselves, so
a name git would refuse is still seen (and refused by the host). `collect` adds the
bundle of the changed branches and a synthetic WIP commit, made from a scratch
repository that holds only synthetic ref names and none of the clone's config, and
streams it on stdout after the inspection (stream.py): nothing of the controller is
mounted.

`reset` (clone mounted read-write) puts the clone back on a base fetched from a bundle
mounted at /base: refs, stash, reflogs, in-progress operations and untracked files go.
"""
