"""Make the environment tests' test doubles (`_fake_libero`) importable: the suite runs with
`--import-mode=importlib`."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
