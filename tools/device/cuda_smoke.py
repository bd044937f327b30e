"""CUDA smoke of the SRPO pieces: the tiny VLA through the train engine and VLAPolicy, and the V-JEPA 2 embedder
(tiny random config), each against the same computation on the CPU.

Run from the repository root with rl-core and rl-engines on PYTHONPATH (tools/device/check.sh does).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import traceback

import torch

sys.path.insert(0, "packages/rl-engines/tests/vla")
from _vla_helpers import small_config, trajectory_batch, vla_engine_config, with_ppo_fields

from rl_core.losses import LossNormalizer, PolicyLossInputs, get_policy_loss
from rl_engines.training import ForwardOutput, ForwardSpec, FSDPEngine, LossOutput
from rl_engines.vla import VLAPolicy


def ppo(outputs: ForwardOutput, micro: dict[str, torch.Tensor], normalizer: LossNormalizer) -> LossOutput:
    inputs = PolicyLossInputs(outputs.log_probs, micro["old_log_probs"], micro["advantages"], micro["response_mask"])
    loss, metrics = get_policy_loss("ppo")(inputs, normalizer=normalizer)
    return LossOutput(loss, metrics)


def vla() -> None:
    cpu = FSDPEngine.from_config(vla_engine_config(max_tokens=150))
    gpu = FSDPEngine.from_config(dataclasses.replace(vla_engine_config(max_tokens=150), device="cuda"))
    batch = with_ppo_fields(trajectory_batch(cpu.hf_config, batch=6, steps=3))
    before = gpu.forward(batch, ForwardSpec()).log_probs.cpu()
    err = (cpu.forward(batch, ForwardSpec()).log_probs - before).abs().max().item()
    print(f"VLA engine forward cpu vs cuda (fp32) max |dlogp| = {err:.2e}")
    assert err < 1e-3, err
    rc = cpu.train_step(batch, ppo, ForwardSpec())
    rg = gpu.train_step(batch, ppo, ForwardSpec())
    print(f"train_step loss cpu {rc.loss:.6f} cuda {rg.loss:.6f}")
    print(f"grad norm cpu {rc.grad_norm:.6f} cuda {rg.grad_norm:.6f}")
    assert abs(float(rc.loss) - float(rg.loss)) < 1e-3 and not rg.skipped
    wc = dict(kv for bucket in cpu.export_weights() for kv in bucket)
    wg = dict(kv for bucket in gpu.export_weights() for kv in bucket)
    dw = max((wc[k].float() - wg[k].float().cpu()).abs().max().item() for k in wc)
    print(f"after one step: {len(wc)} tensors, cpu vs cuda max |dw| = {dw:.2e}")
    assert dw < 1e-3
    after = gpu.forward(batch, ForwardSpec()).log_probs.cpu()
    mask = batch["response_mask"].bool()
    rise = ((after - before)[mask] * batch["advantages"][mask]).sum().item()
    print(f"sum of advantage x log-prob change on cuda = {rise:.4f} (> 0: positive-advantage actions rose)")
    assert rise > 0
    obs = (batch["instruction_ids"], batch["instruction_mask"], batch["pixel_values"][:, 0])
    bins_c, lp_c = VLAPolicy(small_config(), device="cpu", init_seed=3).act(*obs, temperature=0.0)
    policy = VLAPolicy(small_config(), device="cuda", init_seed=3)
    bins_g, lp_g = policy.act(*obs, temperature=0.0)
    same = torch.equal(bins_c, bins_g.cpu())
    print(f"VLAPolicy greedy cpu vs cuda: bins equal {same}, max |dlogp| {(lp_c - lp_g.cpu()).abs().max().item():.2e}")
    assert same
    sampled, log_probs = policy.act(*obs, temperature=1.0, generator=torch.Generator(device="cuda").manual_seed(0))
    print("VLAPolicy sampled on", sampled.device, tuple(sampled.shape), "finite", bool(torch.isfinite(log_probs).all()))


def vjepa() -> None:
    from transformers import VJEPA2Config, VJEPA2Model

    import rl_engines.embedders  # noqa: F401  (registers vjepa2)
    from rl_core.envs import EmbedderConfig, EnvSpec, make_video_embedder

    spec = EnvSpec("toy", (3, 20, 24), action_dims=1, action_bins=3, max_steps=8, task_names=("a",), num_trials=1)
    torch.manual_seed(0)
    config = VJEPA2Config(
        crop_size=32, frames_per_clip=4, tubelet_size=2, patch_size=16, hidden_size=48, num_hidden_layers=1,
        num_attention_heads=2, mlp_ratio=2.0, pred_hidden_size=24, pred_num_hidden_layers=1,
        pred_num_attention_heads=2, pred_num_mask_tokens=2,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        VJEPA2Model(config).save_pretrained(tmp)
        gen = torch.Generator().manual_seed(0)
        videos = [torch.randint(0, 256, (t, 3, 20, 24), dtype=torch.uint8, generator=gen) for t in (5, 0, 1, 9)]
        outs = {}
        for device in ("cpu", "cuda"):
            embedder_config = EmbedderConfig(name="vjepa2", path=tmp, num_frames=3, dim=48, device=device)
            outs[device] = make_video_embedder(embedder_config, spec).embed(videos).cpu()
        err = (outs["cpu"] - outs["cuda"]).abs().max().item()
        print(f"V-JEPA 2 embedder cpu vs cuda max |d| = {err:.2e}, shape {tuple(outs['cuda'].shape)}")
        assert err < 1e-3


if __name__ == "__main__":
    failed = 0
    for check in (vla, vjepa):
        try:
            check()
            print(f"== {check.__name__} OK")
        except Exception as exc:  # report each check and go on
            traceback.print_exc()
            print(f"== {check.__name__} FAILED: {exc!r}")
            failed += 1
    sys.exit(1 if failed else 0)
