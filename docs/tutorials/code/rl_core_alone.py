"""GRPO in a plain torch loop with rl-core alone: no Ray, no rl-runtime, no transformers.

The "policy" writes 6 tokens from a vocabulary of 8, one logits row per (prompt, position); prompt p is rewarded for
each token equal to p. rl-core supplies the log-probs, the reward placement, the group-relative advantages and the
clipped policy loss; the loop, the sampling and the optimizer are your own.

    python rl_core_alone.py          # a few seconds on a CPU; prints the mean reward as it rises
"""

import torch

from rl_core.advantages import AdvantageInputs, get_advantage_estimator
from rl_core.logprobs import log_probs_from_logits
from rl_core.losses import PolicyLossInputs, get_policy_loss
from rl_core.shaping import scores_to_token_level

PROMPTS, SAMPLES, LENGTH, VOCAB = 4, 8, 6, 8
torch.manual_seed(0)
logits_table = torch.nn.Parameter(torch.zeros(PROMPTS, LENGTH, VOCAB))  # the whole policy
optimizer = torch.optim.Adam([logits_table], lr=0.1)
estimator = get_advantage_estimator("grpo")
policy_loss = get_policy_loss("ppo")

prompts = torch.arange(PROMPTS).repeat_interleave(SAMPLES)  # (B,) B = PROMPTS * SAMPLES; a group per prompt
mask = torch.ones(prompts.numel(), LENGTH)  # (B, T): every token is a response token
first_reward = None
for step in range(30):
    # Rollout: sample with the current policy and keep its log-probs (the "old" policy of this step).
    with torch.no_grad():
        logits = logits_table[prompts]  # (B, T, V)
        responses = torch.distributions.Categorical(logits=logits).sample()  # (B, T)
        old_log_probs = log_probs_from_logits(logits, responses)  # (B, T)
    # Reward: the fraction of tokens equal to the prompt's id, on the last response token.
    scores = (responses == prompts[:, None]).float().mean(dim=1)  # (B,)
    rewards = scores_to_token_level(scores, mask)  # (B, T)
    advantages = estimator(AdvantageInputs(rewards, mask, prompts)).advantages  # (B, T)
    # Update: one clipped-surrogate step on the fresh log-probs.
    log_probs = log_probs_from_logits(logits_table[prompts], responses)  # (B, T), differentiable
    out = policy_loss(PolicyLossInputs(log_probs, old_log_probs, advantages, mask), clip_ratio=0.2)
    optimizer.zero_grad()
    out.loss.backward()
    optimizer.step()
    first_reward = scores.mean().item() if first_reward is None else first_reward
    if step % 10 == 0 or step == 29:
        print(f"step {step:2d}  mean reward {scores.mean().item():.3f}  loss {out.loss.item():+.4f}")

print(f"mean reward {first_reward:.3f} -> {scores.mean().item():.3f}")
