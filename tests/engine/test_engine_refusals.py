"""The refusals of engine/ that no other test reaches, each through ``recordmill.write`` in this
process (the command line words them the same): appends of another shape, a plugin that
breaks what it announced, settings out of range. Each test names the message it expects and
checks that the output is as it was."""

from __future__ import annotations

import pytest

import recordmill
from recordmill.errors import ConfigError, OutputError, RecordmillError, SchemaError, TaskError
from tests.conftest import edit_manifest, make_plugin

PLUGIN = """
    import recordmill

    def add_options(parser):
        parser.add_argument("--fields", default="id,label")
        parser.add_argument("--announce", action="store_true")
        parser.add_argument("--reject", action="store_true")
        parser.add_argument("--extra", type=int, default=0, help="rows past those announced")

    def task_number():
        return 2

    def task_rows(task_id, options):
        return 4 if options.announce else None

    def schema(options):
        kinds = {"id": "int64", "label": "int32", "tags": {"type": "int32", "shape": [-1]}}
        return {name: kinds[name] for name in options.fields.split(",")}

    def dict_data(task_id, options):
        if options.reject and task_id == 1:
            yield recordmill.Reject("input 1", "unreadable")
        for i in range(4 + options.extra):
            row = {"id": task_id * 10 + i, "label": i, "tags": [i] * i}
            yield {name: row[name] for name in options.fields.split(",")}
"""
OPTIONS = ("fields", "announce", "reject", "extra")


@pytest.fixture
def plugin(tmp_path):
    return make_plugin(tmp_path / "p", PLUGIN)


def write(plugin, out, **values):
    values = {"workers": 0, "progress": False, **values}
    options = {k: values.pop(k) for k in list(values) if k in OPTIONS}
    return recordmill.write(plugin, out, options=options, **values)


@pytest.fixture
def dataset(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, row_group_size=3)
    return out, sorted(p.read_bytes() for p in out.iterdir())


def unchanged(dataset) -> bool:
    out, files = dataset
    return sorted(p.read_bytes() for p in out.iterdir()) == files


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ("id", "cannot --append: field 'label' is in the dataset, not in this plugin's declared"),
        (
            "id,label,tags",
            "cannot --append: field 'tags' of this plugin's declared schema is not in the dataset",
        ),
        (
            "label,id",
            "cannot --append: this plugin's declared schema has the dataset's fields in another "
            "order (label, id; the dataset: id, label)",
        ),
    ],
)
def test_an_append_of_other_fields_is_refused(plugin, dataset, fields, line):
    with pytest.raises(SchemaError) as caught:
        write(plugin, dataset[0], append=True, fields=fields)
    assert line in str(caught.value)
    assert unchanged(dataset)


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ({"format": "arrow"}, "cannot --append --format arrow to {out}: the dataset's is parquet"),
        ({"row_group_size": 5}, "--row-group-size 5 to {out}: the dataset's is 3 (an append takes"),
    ],
)
def test_an_append_of_other_settings_is_refused(plugin, dataset, setting, line):
    with pytest.raises(ConfigError) as caught:
        write(plugin, dataset[0], append=True, **setting)
    assert line.format(out=dataset[0]) in str(caught.value)
    assert "leave --" in str(caught.value) and unchanged(dataset)


def test_an_append_past_the_last_version_is_refused(plugin, dataset):
    out, _ = dataset
    edit_manifest(out, lambda m: m.update(version=9999))
    files = sorted(p.read_bytes() for p in out.iterdir())
    with pytest.raises(OutputError) as caught:
        write(plugin, out, append=True)
    assert f"cannot --append to {out}: it has 9999 versions, the most a dataset holds" in str(
        caught.value
    )
    assert unchanged((out, files))


def test_a_reject_fails_a_plugin_that_announces_its_rows_by_default(plugin, tmp_path):
    # Written straight to partitions (the rows announced), a Reject under --on-bad-input fail
    # fails the run as it does on the staged path.
    with pytest.raises(TaskError) as caught:
        write(plugin, tmp_path / "out", announce=True, reject=True)
    assert str(caught.value) == (
        "task 1 failed: the plugin rejected input 1: unreadable "
        "(--on-bad-input skip records it and goes on)"
    )
    assert not (tmp_path / "out").exists()


def test_a_plugin_that_yields_more_rows_than_it_announced_is_refused(plugin, tmp_path):
    with pytest.raises(TaskError) as caught:
        write(plugin, tmp_path / "out", announce=True, extra=1)
    assert "task_rows() announced 4 rows, dict_data() yielded more than 4" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_plugin_that_yields_no_row_of_those_it_announced_is_refused(plugin, tmp_path):
    with pytest.raises(TaskError) as caught:
        write(plugin, tmp_path / "out", announce=True, extra=-4)
    assert "task 0 failed: task_rows() announced 4 rows, dict_data() yielded 0" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_dedup_key_of_lists_is_refused(plugin, tmp_path):
    with pytest.raises(ConfigError) as caught:
        write(plugin, tmp_path / "out", fields="id,tags", dedup_key="tags")
    assert "--dedup-key field 'tags' is list<item: int32>; a key is numbers, strings or bytes" in (
        str(caught.value)
    )


def test_a_none_in_a_field_not_nullable_is_refused(tmp_path):
    source = """
        def task_number():
            return 1

        def schema():
            return {"x": "int32"}

        def dict_data(task_id):
            yield {"x": 1}
            yield {"x": None}
    """
    with pytest.raises(RecordmillError) as caught:
        write(make_plugin(tmp_path / "p", source), tmp_path / "out")
    assert (
        "row 1, field 'x': value is None; declare the field with \"nullable\": true to allow it"
        in str(caught.value)
    )


def test_a_schema_hook_that_raises_is_named(tmp_path):
    source = """
        def task_number():
            return 1

        def schema():
            return {"x": undefined_name}

        def dict_data(task_id):
            yield {"x": 1}
    """
    with pytest.raises(recordmill.PluginError) as caught:
        write(make_plugin(tmp_path / "p", source), tmp_path / "out")
    assert str(caught.value).startswith(
        "plugin p: schema() raised NameError: name 'undefined_name'"
    )


def test_settings_and_setting_keywords_together_are_refused(plugin, tmp_path):
    from recordmill.engine.settings import WriteSettings

    with pytest.raises(
        TypeError, match=r"takes settings= or setting keywords, not both: \['workers'\]"
    ):
        recordmill.write(plugin, tmp_path / "out", settings=WriteSettings(), workers=1)


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ({"task_timeout": 0}, "--task-timeout must be more than 0 seconds, got 0"),
        ({"max_rejects": -1}, "--max-rejects must be at least 0, got -1"),
    ],
)
def test_settings_out_of_range_are_refused(plugin, tmp_path, setting, line):
    with pytest.raises(ConfigError) as caught:
        write(plugin, tmp_path / "out", workers=1, **setting)
    assert line in str(caught.value)
