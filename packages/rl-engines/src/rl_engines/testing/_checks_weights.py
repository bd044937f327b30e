"""Conformance checks of weight updates: each transport v1 -> v2, partial updates, cache flush, rejections."""

from __future__ import annotations

import torch
from safetensors.torch import save_file

from rl_engines.rollout import EngineStateError, ParameterShapeError, UnknownParameterError, UnversionedWeightsError
from rl_engines.sync import SharedMemoryTransport, SyncError, WeightSync, WeightSyncConfig, as_buckets
from rl_engines.testing._harness import BUCKET_BYTES, Harness, expect
from rl_engines.testing._models import V1, V2

NEW_TOKENS = 10


def check_transports_v1_to_v2(h: Harness) -> None:
    """Every transport the engine supports moves it from v1 to v2: outputs, versions and checksum follow."""
    prompts = h.models.prompts(3, seed=21)
    v2_sum = h.models.checksum(h.models.state(V2))
    for transport in h.transports():
        h.reset()
        before = h.greedy(prompts, NEW_TOKENS)
        h.expect_greedy(before, prompts, V1, f"{transport}: before the update")
        report = h.sync(h.models.state(V2), V2, transport)
        expect(report.buckets > 1, f"{transport}: the sync used {report.buckets} bucket(s); expected several")
        expect(h.engine.weight_version() == V2, f"{transport}: weight_version() is {h.engine.weight_version()!r}")
        expect(h.engine.weights_checksum() == v2_sum, f"{transport}: the engine's checksum is not v2's")
        after = h.greedy(prompts, NEW_TOKENS)
        h.expect_greedy(after, prompts, V2, f"{transport}: after the update")
        expect(all(o.weight_version == V2 for o in after), f"{transport}: outputs do not report v2")
        expect(
            any(a.output_ids != b.output_ids for a, b in zip(before, after, strict=True)),
            f"{transport}: v2 changed nothing",
        )


def check_partial_update(h: Harness) -> None:
    """Updating one layer changes exactly those tensors; every other tensor stays bit-identical."""
    h.require("tensor")
    h.reset()
    names = h.models.names
    layer = [n for n in names if ".layers.1." in n]
    rest = [n for n in names if n not in layer]
    v1, v2 = h.models.state(V1), h.models.state(V2)
    h.sync(v2, V2 + 1, "reference", names=layer)  # v1 with v2's layer 1: a version neither model has
    expect(h.engine.weights_checksum(layer) == h.models.checksum(v2, layer), "updated tensors do not match v2")
    expect(h.engine.weights_checksum(rest) == h.models.checksum(v1, rest), "tensors outside the update changed")
    mixed = h.models.model_with({**v1, **{n: v2[n] for n in layer}})
    prompt = h.models.prompts(1, seed=22)[0]
    output = h.greedy([prompt], NEW_TOKENS)[0]
    # generate comes from GenerationMixin, which the PreTrainedModel type lacks.
    reference = mixed.generate(  # pyright: ignore[reportCallIssue]
        torch.tensor([prompt]), do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0
    )[0, len(prompt) :].tolist()
    expect(list(output.output_ids) == reference, f"partial update output {output.output_ids} != {reference}")


def check_prefix_cache_flushed(h: Harness) -> None:
    """A prompt served (and cached) under v1 is recomputed under v2 after a sync."""
    h.reset()
    prompts = h.models.prompts(2, seed=23)
    for _ in range(2):  # the second call may be served from the engine's prompt cache
        h.expect_greedy(h.greedy(prompts, NEW_TOKENS), prompts, V1, "cached prompt before the update")
    h.sync(h.models.state(V2), V2, h.transports()[0])
    h.expect_greedy(h.greedy(prompts, NEW_TOKENS), prompts, V2, "cached prompt after the update (stale cache?)")


def _expect_still_v1(h: Harness, what: str) -> None:
    v1_sum = h.models.checksum(h.models.state(V1))
    expect(h.engine.health(), f"{what}: health() turned false")
    expect(h.engine.weights_checksum() == v1_sum, f"{what}: a rejected update changed the weights")
    expect(h.engine.weight_version() == V1, f"{what}: the version changed to {h.engine.weight_version()!r}")
    prompts = h.models.prompts(2, seed=24)
    h.expect_greedy(h.greedy(prompts, NEW_TOKENS), prompts, V1, f"{what}: serving afterwards")


def check_update_errors(h: Harness) -> None:
    """Unknown names and wrong shapes are rejected with typed errors, through every transport; v1 keeps serving."""
    h.reset()
    name = h.models.names[0]
    good = h.models.state(V2)[name]
    bad_buckets = {
        "unknown name": (UnknownParameterError, {"model.no_such_tensor.weight": good, name: good}),
        "wrong shape": (ParameterShapeError, {name: torch.zeros(good.shape[0] + 1, *good.shape[1:])}),
    }
    for transport in h.transports():
        for what, (error, state) in bad_buckets.items():
            try:
                h.sync(state, V2 + 1, transport, names=list(state))
            except (error, SyncError) as raised:
                expect(isinstance(raised, error), f"{transport} {what}: raised {raised!r}, expected {error.__name__}")
            else:
                raise AssertionError(f"{transport} {what}: the update was accepted")
            _expect_still_v1(h, f"{transport} {what}")
    if "disk" in h.engine.capabilities:
        bad_dir = h.workdir / "bad-shape"
        bad_dir.mkdir(exist_ok=True)
        save_file({name: torch.zeros(good.shape[0] + 1, *good.shape[1:])}, str(bad_dir / "model.safetensors"))
        try:
            h.engine.update_weights_from_disk(str(bad_dir))
        except ParameterShapeError:
            pass
        else:
            raise AssertionError("update_weights_from_disk accepted a wrong shape")
        _expect_still_v1(h, "disk wrong shape")


def check_unversioned_weights_refused(h: Harness) -> None:
    """After a weight change and before set_weight_version, generate is refused rather than mislabelled."""
    h.require("tensor")
    h.reset()
    name = h.models.names[0]
    h.engine.update_weights_from_tensors([(name, h.models.state(V2)[name])])
    prompt = h.models.prompts(1)[0]
    try:
        h.greedy([prompt], 2)
    except (UnversionedWeightsError, EngineStateError):
        pass
    else:
        raise AssertionError("generate served changed weights under the old version label")
    h.engine.set_weight_version(V2 + 1)  # v1 with one tensor changed: a version neither model has
    expect(h.greedy([prompt], 2)[0].weight_version == V2 + 1, "the new version is not reported")


def check_repeated_shared_memory_syncs(h: Harness) -> None:
    """Many syncs through one shared-memory transport (buffers lent and reused), full and partial, all verify."""
    h.require("tensor")
    h.reset()
    v1, v2 = h.models.state(V1), h.models.state(V2)
    layer = [n for n in h.models.names if ".layers.0." in n]
    sync = WeightSync([h.engine], SharedMemoryTransport(), WeightSyncConfig(timeout_s=h.timeout_s))
    expected = dict(v1)
    try:
        for step, (state, names) in enumerate([(v2, None), (v1, layer), (v1, None), (v2, layer), (v2, None)]):
            chosen = sorted(state) if names is None else names
            sync.sync(as_buckets(((n, state[n]) for n in chosen), BUCKET_BYTES), V2 + 1 + step)
            expected.update({n: state[n] for n in chosen})
            expect(h.engine.weights_checksum() == h.models.checksum(expected), f"sync {step} left wrong weights")
    finally:
        sync.close()
    prompts = h.models.prompts(2, seed=25)
    h.expect_greedy(h.greedy(prompts, NEW_TOKENS), prompts, V2, "after repeated shared-memory syncs")
