"""Make the VLA helpers, and the training tests' gloo launcher, importable by the tests and by spawned worker
processes (which inherit sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

for _folder in (Path(__file__).parent, Path(__file__).parent.parent / "training"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
