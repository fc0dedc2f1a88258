"""The manifest: an empty file of the dataset's format whose metadata holds the JSON, readable by
recordmill and by other tools; datasets of format version 1 are refused with the command that
writes them again."""

from __future__ import annotations

import datetime
import json
import platform
import shlex

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.dataset import manifest, manifest_check
from tests.conftest import run_writer


@pytest.fixture
def dataset(counting_plugin, tmp_path):
    out = tmp_path / "out"
    options = {"sizes": "4,6"}
    recordmill.write(
        counting_plugin, out, options=options, partitions=2, shuffle=True, seed=3, progress=False
    )
    return out


def test_the_manifest_is_an_empty_file_of_the_dataset_schema(dataset):
    path = dataset / "_manifest.parquet"
    footer = pq.ParquetFile(path)
    assert footer.metadata.num_rows == 0 and footer.num_row_groups == 0
    assert footer.schema_arrow.names == ["task", "i", "name"]
    found = json.loads(footer.metadata.metadata[b"recordmill.manifest"])
    assert b"recordmill.manifest" not in (footer.schema_arrow.metadata or {})  # held once
    assert found == recordmill.read_manifest(dataset)
    assert found["format_version"] == manifest.FORMAT_VERSION == 2
    assert found["total_rows"] == 10 and found["settings"]["seed"] == 3


def format_1(dataset):
    """Make a written dataset look like one of format version 1: manifest.json beside it."""
    old = recordmill.read_manifest(dataset)
    old["format_version"] = 1
    del old["plugin"]["target"]  # format 1 recorded the plugin's name and kind only
    (dataset / "_manifest.parquet").unlink()
    (dataset / "manifest.json").write_text(json.dumps(old))


def test_format_1_is_refused_with_the_command_that_writes_it_again(dataset, tmp_path):
    format_1(dataset)
    with pytest.raises(recordmill.OutputError, match="format version 1") as info:
        recordmill.open(str(dataset))
    said, command = str(info.value).splitlines()
    assert said == (
        f"{dataset} was written by an earlier recordmill, in format version 1 (a manifest.json "
        f"beside the partitions and arrays as nested lists); this recordmill "
        f"{recordmill.__version__} reads format version 2. Write it again with the same plugin "
        "and options (from the folder the first run was started in, or with --script naming "
        "the plugin's folder):"
    )
    command = command.strip()
    words = shlex.split(command)
    assert words[:2] == ["recordmill", "write"]
    assert words[words.index("--script") + 1] == "counting"  # format 1 recorded no path
    assert "--overwrite" in words and words[words.index("--sizes") + 1] == "4,6"
    assert words[words.index("--seed") + 1] == "3"
    result = run_writer(*words[2:], "--quiet", cwd=tmp_path)  # the advice works as given
    assert result.returncode == 0, result.stderr
    assert len(recordmill.open(str(dataset))) == 10
    assert not (dataset / "manifest.json").exists()


def test_a_newer_format_is_refused(dataset):
    from tests.conftest import edit_manifest

    edit_manifest(dataset, lambda m: m.update(format_version=3))
    with pytest.raises(
        recordmill.OutputError,
        match=r"is in format version 3; this recordmill .* reads format version 2: upgrade "
        "recordmill to read it$",
    ):
        recordmill.open(str(dataset))


def test_the_rewrite_command_names_the_plugin_file_when_it_is_known(dataset, counting_plugin):
    command = manifest.rewrite_command(recordmill.read_manifest(dataset), str(dataset))
    words = shlex.split(command)
    assert words[words.index("--script") + 1] == str(counting_plugin / "plugin.py")
    assert words[words.index("--partitions") + 1] == "2" and "--shuffle" in words


def test_up_to_the_listed_tasks_each_task_has_an_entry(monkeypatch):
    monkeypatch.setattr(manifest, "LISTED_TASKS", 5)
    entries = manifest.task_entries([[3, 2], [0, 1], [3, 2]])  # 5 tasks: at the bound
    assert entries == [
        {"task_id": 0, "rows": 3},
        {"task_id": 1, "rows": 3},
        {"task_id": 2, "rows": 0},
        {"task_id": 3, "rows": 3},
        {"task_id": 4, "rows": 3},
    ]
    assert manifest.task_totals({"tasks": entries}) == (5, 12)


def test_past_the_listed_tasks_runs_of_equal_rows_are_one_entry_each(monkeypatch):
    monkeypatch.setattr(manifest, "LISTED_TASKS", 5)
    # Runs as the write counts them; two neighbouring runs of equal rows become one entry.
    runs = [[4, 1], [0, 3], [0, 2], [7, 1], [4, 1], [4, 5]]
    entries = manifest.task_entries(runs)
    assert entries == [
        {"task_id": 0, "rows": 4},
        {"task_id": 1, "rows": 0, "count": 5},
        {"task_id": 6, "rows": 7},
        {"task_id": 7, "rows": 4, "count": 6},
    ]
    assert manifest.task_totals({"tasks": entries}) == (13, 4 + 7 + 24)
    assert manifest.task_totals({"tasks": []}) == manifest.task_totals({}) == (0, 0)


def test_list_values_add_up_across_partitions_and_tokens_are_the_token_columns():
    partitions = [
        {"values": {"tokens": 5, "labels": 2}},
        {},  # written before entries recorded them
        {"values": None},
        {"values": {"tokens": 7, "input_ids": 1, "box": 4, "token_type_ids": 3}},
    ]
    assert manifest.list_values(partitions) == {
        "tokens": 12,
        "labels": 2,
        "input_ids": 1,
        "box": 4,
        "token_type_ids": 3,
    }
    assert manifest.token_counts(partitions) == {"tokens": 12, "input_ids": 1, "token_type_ids": 3}


def test_a_manifest_records_the_run_only_when_given_and_when_it_was_made(tmp_path):
    made = dict(
        fmt="parquet",
        schema=pa.schema([("x", pa.int64())]),
        partitions=[{"rows": 2}, {"rows": 3}],
        tasks=[],
        rejects={"count": 0, "file": None},
        plugin={"name": "p", "options": {}},
        settings={},
    )
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    plain = manifest.build(**made)
    run = {"plugin": "p", "options": {}, "task_number": 1, "settings": {}}
    assert "run" not in plain and manifest.build(**made, run=run)["run"] == run
    assert plain["total_rows"] == 5
    assert plain["versions"]["python"] == platform.python_version()
    created = datetime.datetime.strptime(plain["created"], "%Y-%m-%dT%H:%M:%SZ")
    created = created.replace(tzinfo=datetime.timezone.utc)
    assert before <= created <= datetime.datetime.now(datetime.timezone.utc)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_manifest_file_holds_its_json_and_the_json_its_checksum(fmt):
    made = {"format": fmt, "total_rows": 0}
    data = manifest.to_bytes(made, pa.schema([("x", pa.int64())]))
    metadata = manifest.file_metadata(data, fmt)
    text = metadata[manifest_check.MANIFEST_KEY]
    assert json.loads(text) == made
    assert metadata[manifest_check.CHECKSUM_KEY] == manifest_check.checksum(text)
