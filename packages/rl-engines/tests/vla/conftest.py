"""Make the shared helpers importable by the tests and by spawned worker processes (which inherit sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
