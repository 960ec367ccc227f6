"""`python3 -m harness` (or the image's archive): the report on stdout."""

from __future__ import annotations

import sys

from .report import main

sys.exit(main())
