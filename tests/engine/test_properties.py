"""Property-based tests (hypothesis): random schemas (scalars, nullable arrays, tensors, lists of
strings and bytes, empty arrays), rows and task sizes (empty tasks too), random partition and
worker counts. The output holds exactly the rows produced, in the one global order, and its
checksums do not depend on the number of workers."""

from __future__ import annotations

import json
import uuid

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordmill
from tests.conftest import make_plugin

HEX = st.binary(max_size=12).map(bytes.hex)
# A field kind: its schema() entry, and the values the plugin reads from JSON (bytes as hex).
FIELDS = {
    "int64": ({"type": "int64"}, st.integers(-(2**63), 2**63 - 1)),
    "int32": ({"type": "int32"}, st.integers(-(2**31), 2**31 - 1)),
    "uint8": ({"type": "uint8"}, st.integers(0, 255)),
    "float64": ({"type": "float64"}, st.floats(allow_nan=False)),
    "bool": ({"type": "bool"}, st.booleans()),
    "string": ({"type": "string"}, st.text(max_size=12)),
    "bytes": ({"type": "bytes"}, HEX),
    "floats": (
        {"type": "float32", "shape": [-1], "nullable": True},
        st.none() | st.lists(st.floats(width=32, allow_nan=False), max_size=5),
    ),
    "pairs": (
        {"type": "int16", "shape": [-1, 2]},
        st.lists(st.lists(st.integers(-(2**15), 2**15 - 1), min_size=2, max_size=2), max_size=3),
    ),
    "tensor": (
        {"type": "uint8", "shape": [4, 5], "nullable": True},
        st.none()
        | st.lists(st.lists(st.integers(0, 255), min_size=5, max_size=5), min_size=4, max_size=4),
    ),
    "box": (
        {"type": "float32", "shape": [4], "nullable": True},
        st.none() | st.lists(st.floats(width=32, allow_nan=False), min_size=4, max_size=4),
    ),
    "tags": ({"type": "string", "shape": [-1]}, st.lists(st.text(max_size=6), max_size=4)),
    "blobs": ({"type": "bytes", "shape": [-1]}, st.lists(HEX, max_size=3)),
}

# The plugin reads its rows from a JSON file (bytes as hex) written by the test.
PLUGIN = """
    import json, os

    DATA = json.load(open(os.path.join(os.path.dirname(__file__), "data.json")))

    def task_number():
        return len(DATA["tasks"])

    def schema():
        return DATA["schema"]

    def value(spec, v):
        if spec["type"] != "bytes" or v is None:
            return v
        return [bytes.fromhex(x) for x in v] if "shape" in spec else bytes.fromhex(v)

    def dict_data(task_id):
        for row in DATA["tasks"][task_id]:
            yield {k: value(DATA["schema"][k], v) for k, v in row.items()}
"""


@st.composite
def datasets(draw):
    names = draw(
        st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=4, unique=True)
    )
    kinds = {name: draw(st.sampled_from(sorted(FIELDS))) for name in names}
    schema = {name: FIELDS[kind][0] for name, kind in kinds.items()}
    row = st.fixed_dictionaries({name: FIELDS[kind][1] for name, kind in kinds.items()})
    tasks = draw(st.lists(st.lists(row, max_size=25), min_size=1, max_size=6))
    if not any(tasks):
        tasks[0] = [draw(row)]
    return schema, tasks


def as_plain(value):
    """Rows as recordmill.open gives them, and the plugin's rows, in one comparable form."""
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [as_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value.item() if isinstance(value, np.generic) else value


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=datasets(), partitions=st.integers(1, 5), shuffle=st.booleans(), seed=st.integers(0, 9))
def test_exactly_the_rows_in_order_whatever_the_workers(tmp_path, data, partitions, shuffle, seed):
    schema, tasks = data
    root = tmp_path / uuid.uuid4().hex
    plugin = make_plugin(root / "random", PLUGIN)
    (plugin / "data.json").write_text(json.dumps({"schema": schema, "tasks": tasks}))
    manifests = []
    for workers in (1, 2):
        out = root / f"out{workers}"
        recordmill.write(
            plugin,
            out,
            partitions=partitions,
            workers=workers,
            shuffle=shuffle,
            seed=seed,
            progress=False,
        )
        manifests.append(recordmill.read_manifest(out))
    assert [p["checksum"] for p in manifests[0]["partitions"]] == [
        p["checksum"] for p in manifests[1]["partitions"]
    ]
    produced = [row for task in tasks for row in task]
    read = [as_plain(row) for row in recordmill.open(str(root / "out2"))]
    assert len(manifests[0]["partitions"]) == partitions
    counts = [p["rows"] for p in manifests[0]["partitions"]]
    assert max(counts) - min(counts) <= 1 and sum(counts) == len(produced)
    if shuffle:
        key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
        assert sorted(map(key, read)) == sorted(map(key, produced))
    else:
        assert read == produced


@given(name=st.text(max_size=8))
def test_a_field_name_is_taken_exactly_when_it_follows_the_rule(name):
    from recordmill.dataset.schema import NAME_RULE, safe_name, to_arrow_schema
    from recordmill.errors import SchemaError

    try:
        schema = to_arrow_schema({name: "int32"})
    except SchemaError as e:
        assert not NAME_RULE.fullmatch(name) and "field names are letters" in str(e)
    else:
        assert NAME_RULE.fullmatch(name) and schema.names == [name]
    assert to_arrow_schema({safe_name(name): "int32"}).names == [safe_name(name)]
