"""A dataset on S3 (moto, on 127.0.0.1) whose partition changed after it was written: its row
groups' and footer's bytes are checked against the CRC-32C the manifest records as they are
fetched, and each damage is one line naming the file and the part (issue 42: these refusals had
no test)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

import recordmill
from tests.conftest import make_plugin

PLUGIN = """
    def task_number():
        return 2

    def schema():
        return {"id": "int64", "name": "string"}

    def dict_data(task_id):
        for i in range(40):
            yield {"id": task_id * 40 + i, "name": f"row {task_id * 40 + i}"}
"""


@pytest.fixture(scope="module")
def written(s3, tmp_path_factory):
    """The dataset on S3 (one partition, row groups of 20 rows), and its partition's bytes."""
    root = tmp_path_factory.mktemp("remote")
    uri = s3("damage/intact")
    recordmill.write(make_plugin(root / "p", PLUGIN), uri, partitions=1, row_group_size=20)
    fs, path = pafs.FileSystem.from_uri(uri)
    part = recordmill.read_manifest(uri)["partitions"][0]
    with fs.open_input_file(f"{path}/{part['file']}") as f:
        data = f.read()
    return uri, part, data


def damaged(s3, written, name, change):
    """A copy of the dataset on S3 whose partition's bytes are ``change(bytes)``."""
    uri, part, data = written
    target = s3(f"damage/{name}")
    fs, source = pafs.FileSystem.from_uri(uri)
    _, path = pafs.FileSystem.from_uri(target)
    pafs.copy_files(source, path, fs, fs)
    with fs.open_output_stream(f"{path}/{part['file']}") as f:
        f.write(change(bytearray(data)))
    return target


def flipped(at: int):
    def change(data):
        data[at] ^= 0x01
        return bytes(data)

    return change


def test_a_changed_byte_of_a_row_group_is_named(s3, written):
    _, part, _ = written
    first, second = part["group_offsets"][1], part["group_offsets"][2]
    uri = damaged(s3, written, "group", flipped((first + second) // 2))  # in row group 1
    ds = recordmill.open(uri)
    assert ds[0]["id"] == 0  # row group 0 is as it was
    with pytest.raises(recordmill.OutputError) as caught:
        ds[20]
    assert str(caught.value) == (
        f"s3://data/damage/group/{part['file']}, row group 1: its bytes do not match its "
        "checksum: the dataset was replaced while it was read (open it again), or it is damaged "
        "(recordmill verify tells more)"
    )


def test_a_changed_byte_of_the_footer_is_named(s3, written):
    _, part, data = written
    uri = damaged(s3, written, "footer", flipped(len(data) - 30))
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(uri)[0]
    assert str(caught.value).startswith(
        f"s3://data/damage/footer/{part['file']}, footer: its bytes do not match its checksum: "
        "the dataset was replaced while it was read"
    )


def test_a_partition_cut_short_is_named(s3, written):
    _, part, _ = written
    cut = damaged(s3, written, "cut", lambda d: bytes(d[: part["group_offsets"][0] + 10]))
    with pytest.raises(recordmill.OutputError) as caught:  # row group 0 fetched: too few bytes
        recordmill.open(cut)[0]
    assert str(caught.value) == (
        f"s3://data/damage/cut/{part['file']}, row group 0: its bytes are fewer than the "
        "manifest says: the dataset was replaced while it was read (open it again), or it is "
        "damaged (recordmill verify tells more)"
    )
    uri = damaged(s3, written, "short", lambda d: bytes(d[: part["group_offsets"][1] + 10]))
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(uri)[0]
    assert str(caught.value) == (
        f"s3://data/damage/short/{part['file']} has a damaged footer: Cannot read past end of "
        "file (recordmill verify tells more)"
    )


def test_a_partition_of_another_schema_is_named_unchecked_too(s3, written, tmp_path):
    """The same rows under another column name, byte for byte as long: with checksums=False
    (what a page reads with) the footer is parsed, and its schema compared."""
    _, part, data = written
    other = tmp_path / "other"
    source = PLUGIN.replace('"name"', '"nbme"')  # a name of the same length
    recordmill.write(make_plugin(tmp_path / "p", source), other, partitions=1, row_group_size=20)
    replaced = (other / part["file"]).read_bytes()
    assert len(replaced) == len(data) and replaced != data
    uri = damaged(s3, written, "schema", lambda _: replaced)
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(uri, checksums=False)[0]
    assert str(caught.value) == (
        f"s3://data/damage/schema/{part['file']} has another schema than the manifest's "
        "(recordmill verify tells more)"
    )
