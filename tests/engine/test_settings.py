"""WriteSettings: one checked object whose fields carry their flags; the bad-input policy's old
flags still work, with a note."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

import recordmill
from recordmill.engine.settings import WriteSettings, add_flags, from_args
from recordmill.errors import ConfigError
from recordmill.plugin.options import to_tokens
from tests.conftest import COUNTING_PLUGIN, make_plugin, run_writer


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"partitions": 0}, r"--partitions must be from 1 to 131,072 \(what a dataset holds at"),
        ({"partitions": 1 << 17 + 1}, r"--partitions must be from 1 to 131,072 .* got 262,144"),
        ({"workers": -1}, r"--workers must be 0 \(in this process\) or more, got -1"),
        ({"workers": 0, "executor": "dask"}, r"--workers 0 runs the tasks in this process"),
        ({"workers": 0, "task_timeout": 5}, r"--task-timeout has no effect with --workers 0"),
        ({"format": "csv"}, r"--format must be one of parquet, arrow"),
        ({"compression": "lzma"}, r"--compression must be one of auto"),
        ({"on_bad_input": "ignore"}, r"--on-bad-input must be fail or skip"),
        ({"retries": -1}, r"--retries must be at least 0"),
        ({"row_group_size": 0}, r"--row-group-size must be at least 1"),
    ],
)
def test_bad_settings_are_refused_when_built(values, message):
    with pytest.raises(ConfigError, match=message):
        WriteSettings(**values)


def test_flags_come_from_the_fields():
    parser = argparse.ArgumentParser()
    add_flags(parser)
    args = parser.parse_args(["--partitions", "3", "--shuffle", "--on-bad-input", "skip"])
    settings = from_args(args, progress=False)
    assert settings == WriteSettings(
        partitions=3, shuffle=True, on_bad_input="skip", progress=False
    )
    assert parser.parse_args(["--mindrecord_partitions", "5"]).partitions == 5
    assert settings.identity()["seed"] == 0 and WriteSettings().identity()["seed"] is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.partitions = 4


BAD_ROWS = """
    def task_number():
        return 1

    def schema():
        return {"x": {"type": "uint8"}}

    def dict_data(task_id):
        yield from ({"x": 1}, {"x": 300}, {"x": 2})
"""


def test_the_old_policy_flags_still_work_with_a_note(tmp_path):
    plugin = make_plugin(tmp_path / "bad", BAD_ROWS)
    result = run_writer("--script", plugin, "--output", tmp_path / "o", "--on-bad-row", "skip")
    assert result.returncode == 0, result.stderr
    assert "note: --on-bad-row is now --on-bad-input" in result.stderr
    assert [r["row"] for r in recordmill.read_rejects(tmp_path / "o")] == [1]
    (tmp_path / "run.yaml").write_text("on-bad-file: skip\n")
    args = ("--script", plugin, "--output", tmp_path / "o2", "--config", tmp_path / "run.yaml")
    result = run_writer(*args)
    assert result.returncode == 0 and "note: on-bad-file is now --on-bad-input" in result.stderr
    with pytest.warns(DeprecationWarning, match="on_bad_record is now --on-bad-input"):
        recordmill.write(plugin, tmp_path / "o3", on_bad_record="skip", workers=1, progress=False)
    assert len(recordmill.open(str(tmp_path / "o3"))) == 2


def test_a_resume_with_other_settings_is_refused_naming_them(tmp_path):
    plugin = make_plugin(tmp_path / "counting", COUNTING_PLUGIN)
    staging = tmp_path / ".out.recordmill-partial"
    staging.mkdir()
    (staging / "run.json").write_text(
        '{"plugin": "counting", "options": {"sizes": "5,0,17,3"}, "task_number": 4, '
        '"settings": {"partitions": 2}}'
    )
    result = run_writer("--script", plugin, "--output", tmp_path / "out", "--resume")
    assert result.returncode == 1 and "cannot --resume" in result.stderr
    assert "--partitions: 2 then, 1 now" in result.stderr


OWN_FLAG = """
    def add_options(parser):
        parser.add_argument("--on-bad-record", default="fail")

    def task_number():
        return 1

    def dict_data(task_id, options):
        yield {"seen": options.on_bad_record}
"""


def test_a_plugin_keeps_an_old_policy_flag_of_its_own(tmp_path):
    plugin = make_plugin(tmp_path / "own", OWN_FLAG)
    result = run_writer(
        "--script", plugin, "--output", tmp_path / "o", "--on-bad-record", "skip", "--quiet"
    )
    assert result.returncode == 0, result.stderr
    assert "note" not in result.stderr
    assert recordmill.open(str(tmp_path / "o"))[0]["seen"] == "skip"


def test_an_old_policy_option_from_python_moves_to_the_setting(tmp_path):
    plugin = make_plugin(tmp_path / "bad", BAD_ROWS)
    with pytest.warns(DeprecationWarning, match="on_bad_file is now --on-bad-input"):
        summary = recordmill.write(
            plugin, tmp_path / "o", options={"on_bad_file": "skip"}, workers=1, progress=False
        )
    assert summary.manifest["settings"]["on_bad_input"] == "skip" and summary.rows == 2


def test_no_fsync_is_a_flag_a_config_key_and_a_keyword_not_part_of_the_run(tmp_path):
    parser = argparse.ArgumentParser()
    add_flags(parser)
    assert from_args(parser.parse_args([])).fsync is True
    assert from_args(parser.parse_args(["--no-fsync"])).fsync is False
    # The setting's name or the flag's, each meaning what it says.
    for values, tokens in [
        ({"fsync": False}, ["--no-fsync"]),
        ({"no-fsync": True}, ["--no-fsync"]),
        ({"fsync": True}, []),
        ({"no_fsync": False}, []),
    ]:
        assert to_tokens(parser, values, "--config run.yaml") == tokens
    assert "fsync" not in WriteSettings(fsync=False).identity()  # --resume may change it
    plugin = make_plugin(tmp_path / "bad", BAD_ROWS)
    summary = recordmill.write(
        plugin, tmp_path / "o", fsync=False, on_bad_input="skip", workers=1, progress=False
    )
    assert summary.rows == 2 and "fsync" not in summary.manifest["settings"]
