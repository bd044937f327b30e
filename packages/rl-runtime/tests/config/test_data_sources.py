"""`data.train_files` / `val_files` take Hugging Face `datasets` folders and .csv/.json files; without the
`datasets` package such a value is refused when the config loads, with the pip line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rl_runtime.config._schema_sections as sections
from rl_runtime.config import ConfigError, RunConfig, config_from_dict


@pytest.mark.parametrize("name", ["saved_folder", "rows.csv", "rows.json"])
def test_datasets_values_load_when_datasets_is_installed(
    minimal_data: dict[str, Any], tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    if "." not in name:
        path.mkdir()
    data = {**minimal_data, "data": {"train_files": [str(path)], "val_files": [str(path)]}}
    config = config_from_dict(RunConfig, data)
    assert config.data.train_files == (path,) and config.data.val_files == (path,)


@pytest.mark.parametrize("setting", ["train_files", "val_files"])
def test_without_datasets_a_folder_is_refused_with_the_pip_line(
    minimal_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setattr(sections, "datasets_installed", lambda: False)
    data = {**minimal_data, "data": {"train_files": ["train.jsonl"], setting: [str(tmp_path), "rows.csv"]}}
    with pytest.raises(ConfigError, match=rf"data.{setting}: expected paths readable without the `datasets` package"):
        config_from_dict(RunConfig, data)
    with pytest.raises(ConfigError, match=r"rows.csv.*; pip install 'rl-coordinator\[datasets\]'"):
        config_from_dict(RunConfig, data)
    # jsonl and parquet need no datasets
    plain = {**minimal_data, "data": {"train_files": ["a.jsonl", "b.parquet"]}}
    assert config_from_dict(RunConfig, plain).data.train_files == (Path("a.jsonl"), Path("b.parquet"))
