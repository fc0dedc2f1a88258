"""The built-in plugins that read files name the input of their rows (``recordmill.kit.Source``),
numbered as in it: a row that does not fit the schema says which file and which of its rows."""

from __future__ import annotations

import os
import re

import pytest

import recordmill.inputs.demo
from recordmill.inputs import tfrecord
from recordmill.kit import Source
from recordmill.plugin.manager import load_plugin
from recordmill.plugin.options import plugin_options
from tests.conftest import run_writer

READERS = {  # the demo data's inputs, split into several tasks where the plugin can
    "tfrecord": lambda d: {"input": d / "tfrecord"},
    "ofrecord": lambda d: {"input": d / "ofrecord"},
    "recordio": lambda d: {"input": d / "recordio"},
    "mnist": lambda d: {"data_dir": d / "mnist", "tasks": 3},
    "imagenet": lambda d: {"image_dir": d / "images", "label_file": d / "labels.txt"},
    "torchrecord": lambda d: {"input": d / "torchrecord", "tasks": 5},
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo") / "data"
    recordmill.inputs.demo.make_demo_data(folder)
    return folder


@pytest.mark.parametrize("name", sorted(READERS))
def test_each_task_names_its_input_and_the_number_of_its_first_row(name, demo):
    if name == "torchrecord":
        pytest.importorskip("lmdb", reason="the torchrecord plugin needs recordmill[torchrecord]")
    plugin = load_plugin(name)
    options = plugin_options(plugin, {k: str(v) for k, v in READERS[name](demo).items()})
    seen: dict[str, int] = {}  # each input's rows so far, in task order
    for task in range(plugin.task_number(options)):
        source, *rows = plugin.dict_data(task, options)
        assert isinstance(source, Source), source
        path = source.name.split(" (from byte")[0]
        assert os.path.exists(path), source
        # A task that goes on where the one before stopped in the same input says so.
        assert source.first == seen.get(source.name, 0), (task, source, seen)
        assert rows and not any(isinstance(row, Source) for row in rows)
        seen[source.name] = source.first + len(rows)


def test_a_row_off_the_schema_names_its_file_and_record(demo, tmp_path):
    # An int64 feature is no bool: the first row of a file that runs is refused, named by the
    # file and its record.
    (tmp_path / "s.yaml").write_text(
        "image/encoded: bytes\nimage/class/label: bool\nimage/bbox: {type: float32, shape: [-1]}\n"
    )
    result = run_writer(
        *("--script", "tfrecord", "--input", demo / "tfrecord", "--schema", tmp_path / "s.yaml"),
        *("--output", tmp_path / "o", "--quiet"),
    )
    assert result.returncode == 1
    said = re.fullmatch(
        r"recordmill: error: (.*), row (\d+) \(task (\d), row (\d+)\), field "
        r"'image_class_label': wrong type; expected bool, got int64 np.int64\((\d)\)\n",
        result.stderr,
    )
    assert said, result.stderr
    path, row, task, task_row, value = said.groups()
    assert path == str(demo / "tfrecord" / f"train-0000{task}-of-00002.tfrecord")
    assert row == task_row  # one task per file: the file's rows are the task's
    records = [r for r in tfrecord.records(path) if not r[3]]
    kind, label = tfrecord.parse_example(records[int(row)][2])["image/class/label"]
    assert (kind, list(label)) == ("int64", [int(value)])
