"""Plain Python values to Arrow without pa.array (recordmill/engine/plain.py): the same arrays
pa.array makes, and no pandas imported on the way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import recordmill
from recordmill.engine.plain import SMALL, numpy_array, plain_array
from tests.conftest import python_prints

REPO = Path(__file__).resolve().parents[2]

SAME_AS_PA_ARRAY = [
    [1, 2, -3, 2**63 - 1, -(2**63)],
    [1, None, 3, None],
    [0.5, float("nan"), -1e300, None],
    [True, False, None, True, True, False, True, False, True],
    ["a", "", "\x00", None, "z" * 1000],
    [b"\x00\xff", b"", None, bytes(range(256))],
    [None, b"x"],
    [b"\x01" * 600_000, None, bytes(range(256)) * 3000],  # large items: into Arrow's memory
    [b"ab", None] * 2048,
    ["a" * 600_000, None, "b" * 500_000],
    [np.uint8(255), np.uint8(0), None],
    [np.int8(-128), np.int8(7)],
    [np.int16(-5), None, np.int16(300)],
    [np.int32(-5), np.int32(9)],
    [np.int64(2**40)],
    [np.uint16(65535)],
    [np.uint32(2**32 - 1)],
    [np.uint64(2**64 - 1), np.uint64(0)],
    [np.float32(1.5), np.float32(-0.0), None],
    [np.float64(2.5)],
    [np.bool_(True), np.bool_(False)],
    [np.str_("ab"), np.str_("")],
    [np.bytes_(b"ab"), np.bytes_(b"")],
]


@pytest.mark.parametrize("values", SAME_AS_PA_ARRAY, ids=range(len(SAME_AS_PA_ARRAY)))
def test_plain_values_make_the_array_pa_array_makes(values):
    made, expected = plain_array(values), pa.array(values)
    made.validate(full=True)
    assert made.type == expected.type and made.null_count == expected.null_count
    # (repr: NaN is not equal to itself, and 0.0 is equal to -0.0)
    assert list(map(repr, made.to_pylist())) == list(map(repr, expected.to_pylist()))


LEFT_TO_PA_ARRAY = [
    [],  # no value to tell the type by
    [None, None],
    [1, 2.5],  # Arrow's own rules for mixed values
    [2**63],  # past int64: Arrow makes uint64 or says it overflows
    [np.float16(1.5)],
    ["\ud800"],  # a lone surrogate is no UTF-8
    ["a", "é€😀"],  # pa.array encodes UTF-8 quicker
    list(range(SMALL + 1)),  # pa.array is quicker a value
    [np.int32(1), np.int64(2)],
    [bytearray(b"x")],
    [[1, 2]],
]


@pytest.mark.parametrize("values", LEFT_TO_PA_ARRAY, ids=range(len(LEFT_TO_PA_ARRAY)))
def test_other_lists_are_left_to_pa_array(values):
    assert plain_array(values) is None


def test_numbers_go_to_arrow_on_their_buffer_only_in_the_machines_byte_order():
    for values in (np.array([1, 2], ">i4"), np.arange(6, dtype=np.float16)[::2], np.zeros(0)):
        assert numpy_array(values).to_pylist() == values.tolist()


def test_a_numpy_array_with_nulls_and_bools_is_what_pa_array_makes_of_it():
    valid = np.array([True, False, True])
    for values in (np.array([1.5, 0, 2]), np.array([True, False, False])):
        made = numpy_array(values, valid)
        made.validate(full=True)
        assert made.equals(pa.array(values, mask=~valid))


def test_a_write_of_plain_values_does_not_import_pandas(tmp_path):
    """The saving itself: the template's rows (ints, strings, bytes, arrays) written in this
    process, and nullable numbers cast to their fields' types, leave pandas unimported where
    it is installed (pa.array would import it: 0.15 s in every worker, or in the fork server
    before any worker starts)."""
    pytest.importorskip("pandas")
    code = (
        "import sys, recordmill\n"
        f"recordmill.write({str(REPO / 'templates' / 'template')!r}, {str(tmp_path / 'o')!r},"
        " partitions=2, workers=0, progress=False)\n"
        "from recordmill.engine.convert import RowConverter\n"
        "import pyarrow as pa\n"
        "schema = pa.schema({'f': pa.float32(), 'g': pa.float64(), 'i': pa.int8()})\n"
        "rows = [{'f': 1.5, 'g': 2, 'i': 3}, {'f': None, 'g': None, 'i': None}]\n"
        "RowConverter(schema).to_batch(rows)\n"  # (nulls, casts: no pandas there either)
        "print('pandas' in sys.modules)\n"
    )
    assert python_prints(code).split() == ["False"]
    assert len(recordmill.open(tmp_path / "o")) == 400
