"""dataset/rejects.py: a Reject's reason the same from run to run, bad input refused or listed
as the policy says, the rejects file written and read back (by version, by other readers as an
empty part), and the lines that stop a run or name a damaged file."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recordmill.dataset import rejects
from recordmill.dataset.storage import Store
from recordmill.errors import SKIP_HINT, InputError, OutputError, RecordmillError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_a_reason_names_no_address_so_it_is_the_same_every_run():
    reject = rejects.Reject(
        "a.jpg", "cannot read <_io.BytesIO object at 0x7f3a2b1c>: bad <x at 0xAB>"
    )
    assert reject.reason == "cannot read <_io.BytesIO object>: bad <x>"
    assert rejects.Reject("a", "<not an address at 0xZZ>").reason == "<not an address at 0xZZ>"
    with pytest.raises(dataclasses.FrozenInstanceError):  # a plugin's Reject is a value
        reject.reason = "other"
    assert len({reject, rejects.Reject("a.jpg", reject.reason)}) == 1


def test_bad_input_is_listed_with_skip_and_refused_otherwise():
    listed = rejects.bad_input(
        {"on_bad_input": "skip"}, "f.csv:3", "2 fields", skipped=", line 4 on"
    )
    assert listed == rejects.Reject("f.csv:3", "2 fields, line 4 on")
    assert rejects.bad_input({"on_bad_input": "skip"}, "f", "r") == rejects.Reject("f", "r")
    for options in ({}, {"on_bad_input": "fail"}):
        with pytest.raises(InputError) as raised:
            rejects.bad_input(options, "f.csv:3", "2 fields", skipped=", line 4 on")
        assert str(raised.value) == f"2 fields {SKIP_HINT}"


def test_a_record_keeps_the_task_and_the_fields_given():
    assert rejects.as_record(3, rejects.Reject("s", "r")) == {
        "task_id": 3,
        "source": "s",
        "reason": "r",
    }
    full = rejects.Reject("s", "r", row=0, field="f", value="'v'")
    assert rejects.as_record(0, full) == {
        "task_id": 0,
        "source": "s",
        "reason": "r",
        "row": 0,
        "field": "f",
        "value": "'v'",
    }


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_the_rejects_file_is_an_empty_part_of_the_schema_holding_each_line(tmp_path, fmt):
    records = [{"task_id": 1, "source": "é.jpg", "reason": "r"}, {"task_id": 2, "source": "b"}]
    name = rejects.write(Store.at(tmp_path), records, SCHEMA, fmt, version=3)
    assert name == f"_rejects-v0003.{fmt}"
    if fmt == "parquet":
        table = pq.read_table(tmp_path / name)
    else:
        table = pa.ipc.open_file(pa.memory_map(str(tmp_path / name))).read_all()
    assert table.num_rows == 0 and table.schema.remove_metadata() == SCHEMA
    # One JSON line a reject under the documented key, its text as written (UTF-8, not escapes)
    if fmt == "parquet":
        metadata = pq.read_metadata(tmp_path / name).metadata
    else:
        metadata = table.schema.metadata
    lines = metadata[b"recordmill.rejects"].decode().splitlines()
    assert lines == [
        '{"task_id": 1, "source": "é.jpg", "reason": "r"}',
        '{"task_id": 2, "source": "b"}',
    ]
    manifest = {"format": fmt}
    assert rejects._read(Store.at(tmp_path), name, manifest) == records


def test_a_rejects_file_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / "_rejects.parquet").write_bytes(b"not parquet")
    with pytest.raises(OutputError, match=rf"^{tmp_path}/_rejects.parquet cannot be read: "):
        rejects._read(Store.at(tmp_path), "_rejects.parquet", {"format": "parquet"})
    rejects.write(Store.at(tmp_path), [], SCHEMA, "parquet")  # no rejects: an empty list back
    assert rejects._read(Store.at(tmp_path), "_rejects.parquet", {"format": "parquet"}) == []


def test_too_many_names_the_count_the_limit_and_the_last():
    error = rejects.too_many(11, 10, rejects.Reject("x.png", "truncated"))
    assert isinstance(error, RecordmillError)
    assert (
        str(error) == "11 inputs rejected, more than --max-rejects 10; the last: x.png: truncated"
    )
    one = rejects.too_many(1, 0, rejects.Reject("y", "z"))
    assert str(one) == "1 input rejected, more than --max-rejects 0; the last: y: z"
