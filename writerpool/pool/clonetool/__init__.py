"""The program writerpool runs inside throwaway writer containers (`python3 -m clonetool`).

It uses the standard library only and never imports writerpool: it runs in the writer
image, against the clone mounted at /work. Input is one JSON object on stdin, output one
JSON object on stdout.

`inspect` reads the clone (mounted read-only) and changes nothing in it: git runs with
--no-optional-locks, a temporary index and a temporary object directory under /tmp that
borrows the clone's objects as alternates. Refs are read from the files themselves, so
a name git would refuse is still seen (and refused by the host). With `bundle`, the
changed branches and a synthetic WIP commit are written as a bundle to /out, from a
scratch repository that holds only synthetic ref names and none of the clone's config.

`reset` (clone mounted read-write) puts the clone back on a base fetched from a bundle
mounted at /base: refs, stash, reflogs, in-progress operations and untracked files go.
"""
