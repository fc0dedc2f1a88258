"""Property-based tests (hypothesis): random schemas, rows and task sizes (empty tasks too),
random partition and worker counts. The output holds exactly the rows produced, in the one
global order, and its checksums do not depend on the number of workers."""

from __future__ import annotations

import json
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordmill
from tests.conftest import make_plugin

VALUES = {
    "int64": st.integers(-(2**63), 2**63 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint8": st.integers(0, 255),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
}

# The plugin reads its rows from a JSON file (bytes as hex) written by the test.
PLUGIN = """
    import json, os

    DATA = json.load(open(os.path.join(os.path.dirname(__file__), "data.json")))

    def task_number():
        return len(DATA["tasks"])

    def schema():
        return {name: {"type": t} for name, t in DATA["schema"].items()}

    def dict_data(task_id):
        for row in DATA["tasks"][task_id]:
            yield {k: bytes.fromhex(v) if DATA["schema"][k] == "bytes" else v for k, v in row.items()}
"""


@st.composite
def datasets(draw):
    names = draw(
        st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=4, unique=True)
    )
    schema = {name: draw(st.sampled_from(sorted(VALUES))) for name in names}
    row = st.fixed_dictionaries({name: VALUES[t] for name, t in schema.items()})
    tasks = draw(st.lists(st.lists(row, max_size=25), min_size=1, max_size=6))
    if not any(tasks):
        tasks[0] = [draw(row)]
    return schema, tasks


def as_json(schema, tasks):
    return {
        "schema": schema,
        "tasks": [
            [{k: v.hex() if schema[k] == "bytes" else v for k, v in r.items()} for r in task]
            for task in tasks
        ],
    }


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=datasets(), partitions=st.integers(1, 5), shuffle=st.booleans(), seed=st.integers(0, 9))
def test_exactly_the_rows_in_order_whatever_the_workers(tmp_path, data, partitions, shuffle, seed):
    schema, tasks = data
    root = tmp_path / uuid.uuid4().hex
    plugin = make_plugin(root / "random", PLUGIN)
    (plugin / "data.json").write_text(json.dumps(as_json(schema, tasks)))
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
    read = recordmill.open(str(root / "out2")).to_arrow().to_pylist()
    assert len(manifests[0]["partitions"]) == partitions
    counts = [p["rows"] for p in manifests[0]["partitions"]]
    assert max(counts) - min(counts) <= 1 and sum(counts) == len(produced)
    if shuffle:
        key = lambda r: json.dumps({k: repr(v) for k, v in r.items()}, sort_keys=True)  # noqa: E731
        assert sorted(map(key, read)) == sorted(map(key, produced))
    else:
        assert read == produced
