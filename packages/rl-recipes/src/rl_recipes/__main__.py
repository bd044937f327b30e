"""`python -m rl_recipes ...` runs the `rl-recipes` command line (how torchrun starts it: `torchrun
--nproc-per-node N -m rl_recipes train grpo ...`)."""

from rl_recipes.cli import main

raise SystemExit(main())
