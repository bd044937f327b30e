"""ShardedLoader: disjoint covering shards, seeded epoch orders, exact resume across epoch boundaries."""

from __future__ import annotations

import itertools
import json

import datasets
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_coordinator import CoordinatorInputError
from rl_coordinator.loading import LoaderBatch, ShardedLoader, epoch_permutation

from ._rows import make_rows, write_jsonl, write_parquet


def loader(rows: list | object, **kwargs) -> ShardedLoader:
    defaults = {"dp_rank": 0, "dp_size": 1, "batch_size": 2, "seed": 0}
    return ShardedLoader(rows, **{**defaults, **kwargs})


def take(it: ShardedLoader, count: int) -> list[LoaderBatch]:
    return list(itertools.islice(it, count))


def test_unshuffled_shards_by_hand() -> None:
    # 10 rows, 2 ranks, 2 rows each: step 0 covers positions 0-3, step 1 positions 4-7, 8 and 9 dropped.
    ranks = [loader(make_rows(10), dp_rank=r, dp_size=2, shuffle=False) for r in range(2)]
    assert ranks[0].steps_per_epoch == 2
    assert [b.indices for b in take(ranks[0], 3)] == [[0, 2], [4, 6], [0, 2]]
    assert [b.indices for b in take(ranks[1], 2)] == [[1, 3], [5, 7]]
    batch = next(loader(make_rows(10), dp_rank=1, dp_size=2, shuffle=False))
    assert batch.rows == [make_rows(10)[1], make_rows(10)[3]]
    assert (batch.epoch, batch.step) == (0, 0)


def test_unshuffled_partial_last_step_by_hand() -> None:
    # 7 rows, 3 ranks, 2 rows each, drop_last=False: step 0 positions 0-5, step 1 has position 6 only.
    shards = [
        [b.indices for b in take(loader(make_rows(7), dp_rank=r, dp_size=3, shuffle=False, drop_last=False), 2)]
        for r in range(3)
    ]
    assert shards == [[[0, 3], [6]], [[1, 4], []], [[2, 5], []]]


@pytest.mark.parametrize(
    ("num_rows", "dp_size", "batch_size", "drop_last"),
    [(24, 4, 3, True), (25, 4, 3, True), (31, 3, 4, True), (31, 3, 4, False), (5, 8, 1, False), (17, 1, 5, False)],
)
def test_shards_are_disjoint_and_cover_each_epoch_once(num_rows, dp_size, batch_size, drop_last) -> None:
    loaders = [
        loader(make_rows(num_rows), dp_rank=r, dp_size=dp_size, batch_size=batch_size, seed=7, drop_last=drop_last)
        for r in range(dp_size)
    ]
    steps = loaders[0].steps_per_epoch
    global_batch = dp_size * batch_size
    assert steps == (num_rows // global_batch if drop_last else -(-num_rows // global_batch))
    for epoch in range(3):
        order = epoch_permutation(num_rows, 7, epoch).tolist()
        seen: list[int] = []
        for step in range(steps):
            window = order[step * global_batch : (step + 1) * global_batch]
            for rank, it in enumerate(loaders):
                batch = next(it)
                assert (batch.epoch, batch.step) == (epoch, step)
                # Brute force: rank r takes positions r, r + dp, ... of the step's window.
                assert batch.indices == window[rank::dp_size]
                assert [row["id"] for row in batch.rows] == batch.indices
                seen.extend(batch.indices)
        assert len(seen) == len(set(seen))
        expected = set(range(num_rows)) if not drop_last else set(order[: steps * global_batch])
        assert set(seen) == expected


def test_epoch_permutation_is_seeded_and_changes_per_epoch() -> None:
    first = epoch_permutation(100, 3, 0)
    assert sorted(first.tolist()) == list(range(100))
    assert first.dtype == torch.int64
    assert torch.equal(first, epoch_permutation(100, 3, 0))
    assert not torch.equal(first, epoch_permutation(100, 3, 1))
    assert not torch.equal(first, epoch_permutation(100, 4, 0))
    # Hash-mixed seeds: (seed, epoch + 1) and (seed + 1, epoch) are unrelated orders.
    assert not torch.equal(epoch_permutation(100, 3, 1), epoch_permutation(100, 4, 0))
    assert torch.equal(epoch_permutation(5, 3, 2, shuffle=False), torch.arange(5))


def test_same_seed_same_stream_different_seed_different_stream() -> None:
    def stream(seed: int) -> list[list[int]]:
        return [b.indices for b in take(loader(make_rows(40), batch_size=4, seed=seed), 25)]

    assert stream(11) == stream(11)
    assert stream(11) != stream(12)
    per_epoch = stream(11)
    assert per_epoch[:10] != per_epoch[10:20]  # epochs 0 and 1 are shuffled differently
    assert sorted(itertools.chain(*per_epoch[10:20])) == list(range(40))


def _resume_matches(rows, stop_after: int, total: int, **kwargs) -> list[LoaderBatch]:
    straight = take(loader(rows, **kwargs), total)
    first = loader(rows, **kwargs)
    head = take(first, stop_after)
    state = json.loads(json.dumps(first.state_dict()))  # a checkpoint holds plain JSON types
    resumed = loader(rows, **kwargs)
    resumed.load_state_dict(state)
    tail = take(resumed, total - stop_after)
    for expected, got in zip(straight, head + tail, strict=True):
        assert (got.epoch, got.step, got.indices, got.rows) == (
            expected.epoch,
            expected.step,
            expected.indices,
            expected.rows,
        )
    return tail


def test_resume_mid_epoch() -> None:
    tail = _resume_matches(make_rows(30), stop_after=4, total=20, batch_size=3, dp_size=2, dp_rank=1, seed=5)
    assert (tail[0].epoch, tail[0].step) == (0, 4)


def test_resume_exactly_at_epoch_boundary_starts_next_epoch() -> None:
    rows = make_rows(30)
    # 30 rows, dp 2, batch 3: 5 steps per epoch; stop right after the last batch of epoch 0.
    first = loader(rows, batch_size=3, dp_size=2, seed=5)
    take(first, 5)
    assert (first.epoch, first.step) == (1, 0)
    assert first.state_dict()["epoch"] == 1
    tail = _resume_matches(rows, stop_after=5, total=12, batch_size=3, dp_size=2, seed=5)
    assert (tail[0].epoch, tail[0].step) == (1, 0)


def test_resume_at_boundary_with_epoch_limit() -> None:
    rows = make_rows(12)
    first = loader(rows, batch_size=4, num_epochs=2)
    take(first, 3)  # all of epoch 0
    resumed = loader(rows, batch_size=4, num_epochs=2)
    resumed.load_state_dict(first.state_dict())
    assert [b.epoch for b in resumed] == [1, 1, 1]  # epoch 1 runs, then the limit ends the stream
    done = loader(rows, batch_size=4, num_epochs=1)
    done.load_state_dict(first.state_dict())
    assert list(done) == []


def test_state_with_step_at_epoch_end_rolls_over() -> None:
    rows = make_rows(12)
    it = loader(rows, batch_size=4)
    state = it.state_dict() | {"epoch": 2, "step": 3}
    it.load_state_dict(state)
    assert (it.epoch, it.step) == (3, 0)


def test_state_of_one_rank_resumes_another() -> None:
    rows = make_rows(24)
    rank0 = loader(rows, dp_rank=0, dp_size=2, batch_size=3)
    take(rank0, 6)
    rank1 = loader(rows, dp_rank=1, dp_size=2, batch_size=3)
    rank1.load_state_dict(rank0.state_dict())
    straight = take(loader(rows, dp_rank=1, dp_size=2, batch_size=3), 7)
    assert next(rank1).indices == straight[6].indices


@settings(max_examples=40, deadline=None)
@given(
    num_rows=st.integers(1, 40),
    dp_size=st.integers(1, 4),
    batch_size=st.integers(1, 5),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**40),
    stop_after=st.integers(0, 25),
)
def test_resume_property(num_rows, dp_size, batch_size, drop_last, seed, stop_after) -> None:
    if drop_last and num_rows < dp_size * batch_size:
        drop_last = False
    kwargs = {
        "dp_size": dp_size,
        "dp_rank": dp_size - 1,
        "batch_size": batch_size,
        "seed": seed,
        "drop_last": drop_last,
    }
    _resume_matches(make_rows(num_rows), stop_after=stop_after, total=stop_after + 8, **kwargs)


def test_file_and_hf_dataset_sources_give_the_same_stream(tmp_path) -> None:
    rows = make_rows(23)
    hf = datasets.Dataset.from_dict({key: [row[key] for row in rows] for key in rows[0]})
    kwargs = {"dp_rank": 1, "dp_size": 3, "batch_size": 2, "seed": 9, "required_fields": ("prompt", "answer")}
    streams = [
        take(loader(source, **kwargs), 9)
        for source in (rows, hf, write_jsonl(tmp_path / "d.jsonl", rows), write_parquet(tmp_path / "d.parquet", rows))
    ]
    for stream in streams:
        assert [b.indices for b in stream] == [b.indices for b in streams[0]]
        assert [b.rows for b in stream] == [[rows[i] for i in b.indices] for b in streams[0]]


def test_a_batch_says_where_each_row_comes_from(tmp_path) -> None:
    path = write_jsonl(tmp_path / "w.jsonl", make_rows(5))
    batch = next(loader(path, batch_size=2, shuffle=False, dp_rank=1, dp_size=2))
    assert batch.indices == [1, 3]
    assert batch.locations == [f"{path} row 1 (line 2)", f"{path} row 3 (line 4)"]


def test_malformed_rows_are_named(tmp_path) -> None:
    rows = make_rows(6)
    del rows[4]["answer"]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    it = loader(path, batch_size=6, shuffle=False, required_fields=("prompt", "answer"))
    with pytest.raises(
        CoordinatorInputError, match=r"m.jsonl row 4 \(line 5\) is missing required field\(s\) \['answer'\]"
    ):
        next(it)
    assert (it.epoch, it.step) == (0, 0)  # a failed read does not advance
    path.write_text('{"prompt": "a", "answer": "b"}\n{"prompt": "a", "answer": }\n')
    with pytest.raises(CoordinatorInputError, match=r"m.jsonl row 1 \(line 2\) is not valid JSON"):
        next(loader(path, batch_size=2, shuffle=False))
    hf = datasets.Dataset.from_dict({"prompt": ["a", "b"]})
    with pytest.raises(
        CoordinatorInputError, match=r"dataset Dataset row 0 is missing required field\(s\) \['answer'\]"
    ):
        loader(hf, required_fields=("prompt", "answer"))
    with pytest.raises(CoordinatorInputError, match=r"dataset list row 1 is missing required field\(s\) \['answer'\]"):
        next(loader([{"answer": 1}, {"prompt": 2}], shuffle=False, required_fields=("answer",)))


def test_construction_rejections() -> None:
    rows = make_rows(10)
    with pytest.raises(CoordinatorInputError, match=r"dp_rank must be an int in \[0, dp_size\) = \[0, 4\), got 4"):
        loader(rows, dp_rank=4, dp_size=4)
    with pytest.raises(CoordinatorInputError, match=r"dp_rank must be an int in \[0, dp_size\) = \[0, 2\), got -1"):
        loader(rows, dp_rank=-1, dp_size=2)
    with pytest.raises(CoordinatorInputError, match="dp_size must be an int >= 1, got 0"):
        loader(rows, dp_size=0)
    with pytest.raises(CoordinatorInputError, match="batch_size must be an int >= 1, got 0"):
        loader(rows, batch_size=0)
    with pytest.raises(CoordinatorInputError, match="seed must be an int"):
        loader(rows, seed=1.5)
    with pytest.raises(CoordinatorInputError, match="num_epochs must be an int >= 1, got 0"):
        loader(rows, num_epochs=0)
    with pytest.raises(CoordinatorInputError, match="required_fields must be a sequence of field names"):
        loader(rows, required_fields="prompt")
    with pytest.raises(CoordinatorInputError, match="dataset list has no rows"):
        loader([])


def test_batch_size_that_cannot_be_served_names_numbers_and_fix() -> None:
    rows = make_rows(10)
    with pytest.raises(
        CoordinatorInputError,
        match=r"has 10 rows, fewer than dp_size \* batch_size = 4 \* 3 = 12.*lower batch_size to at most 2 or set "
        r"drop_last=False",
    ):
        loader(rows, dp_size=4, batch_size=3)
    with pytest.raises(CoordinatorInputError, match=r"= 16 \* 1 = 16.*use fewer data-parallel ranks or set drop_last"):
        loader(rows, dp_size=16, batch_size=1)
    assert loader(rows, dp_size=4, batch_size=3, drop_last=False).steps_per_epoch == 1


def test_state_dict_rejections() -> None:
    rows = make_rows(12)
    saved = loader(rows, seed=1).state_dict()
    with pytest.raises(CoordinatorInputError, match=r"saved with seed=1 but this loader has seed=2"):
        loader(rows, seed=2).load_state_dict(saved)
    with pytest.raises(CoordinatorInputError, match=r"saved with dp_size=1 but this loader has dp_size=2"):
        loader(rows, seed=1, dp_size=2).load_state_dict(saved)
    with pytest.raises(CoordinatorInputError, match=r"saved with dataset_len=12 but this loader has dataset_len=11"):
        loader(rows[:11], seed=1).load_state_dict(saved)
    with pytest.raises(
        CoordinatorInputError, match=r"saved with batch_size=2, shuffle=True but .* batch_size=3, shuffle=False"
    ):
        loader(rows, seed=1, batch_size=3, shuffle=False).load_state_dict(saved)
    it = loader(rows, seed=1)
    with pytest.raises(CoordinatorInputError, match=r"lacks \['step'\]"):
        it.load_state_dict({k: v for k, v in saved.items() if k != "step"})
    with pytest.raises(CoordinatorInputError, match="has format 99, this version reads format 1"):
        it.load_state_dict(saved | {"format": 99})
    with pytest.raises(CoordinatorInputError, match=r"state\['step'\] = 7 is past the 6 steps of an epoch"):
        it.load_state_dict(saved | {"step": 7})
    with pytest.raises(CoordinatorInputError, match=r"state\['epoch'\] must be an int >= 0, got -1"):
        it.load_state_dict(saved | {"epoch": -1})
    with pytest.raises(CoordinatorInputError, match="state must be a mapping"):
        it.load_state_dict([1, 2])
    assert (it.epoch, it.step) == (0, 0)  # rejected states leave the position alone
