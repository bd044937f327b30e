"""Writes docs/reference/configuration.md from the config classes (rl_recipes.cli.config_reference); rl-recipes'
tests/docs/test_config_reference.py fails when the committed page differs from what this would write.

    python tools/gen_config_reference.py           # in an environment holding the packages
"""

from __future__ import annotations

from pathlib import Path

from rl_recipes.cli import config_reference

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "configuration.md"


def main() -> None:
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(config_reference())
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
