"""A recordmill dataset plugin: the smallest complete one. Copy this folder to start your own.

    cp -r templates/template xyz        # or: recordmill new xyz
    $EDITOR xyz/plugin.py               # implement task_number() and dict_data(task_id)
    recordmill write --script xyz --output out/xyz --partitions 4 --workers 2
    # in a clone of recordmill, the same: python writer.py --script xyz ...

As it is, this plugin writes a few hundred synthetic rows in several tasks, so you can see output
before you change anything. Replace the bodies of the functions below with your dataset's logic.

recordmill calls the functions here by their names (they are pluggy hooks, documented in
recordmill/plugin/hookspecs.py). Each one may leave out parameters it does not need.

The folder is the plugin: more modules can sit beside this file (xyz/helpers.py) and be imported
with `from . import helpers` or `from .helpers import parse` (anywhere in this file), or with
`import helpers` (at the top of this file, as in a script), in the main process and in every
worker, local or on Dask and Ray. Another plugin's helpers.py is another module.

To debug, run the tasks in the main process: `recordmill write --script xyz --output out/xyz
--workers 0`; breakpoint() in dict_data() then stops there.
"""

import numpy as np

# ------------------------------------------------------------------------------------------------
# Optional: your plugin's own command-line options.
#
# They appear in `python writer.py --script xyz --help`, can be set in a --config YAML file,
# and reach every other hook as `options` ("--rows-per-task" arrives as options.rows_per_task).
# This replaces the mr_argument.pickle trick of MindRecord's example.
# ------------------------------------------------------------------------------------------------


def add_options(parser):
    parser.add_argument("--tasks", type=int, default=4, help="number of tasks (default: 4)")
    parser.add_argument(
        "--rows-per-task", type=int, default=100, help="rows in each task (default: 100)"
    )


# ------------------------------------------------------------------------------------------------
# Required: how many independent tasks your data splits into.
#
# Return 1 if rows can only be produced serially. Return N if the work splits into N tasks that
# can run in parallel. Typical splits:
#   - an image folder with one sub-folder per class: one task per class folder;
#   - many input files (TFRecord, CSV, ...): one task per file;
#   - one big file: N tasks, task K takes the rows with (row_number % N == K).
# ------------------------------------------------------------------------------------------------


def task_number(options):
    return options.tasks


# ------------------------------------------------------------------------------------------------
# Optional: the schema shared by every row.
#
# Without it, recordmill infers the schema from the first row (int -> int64, float -> float64,
# str -> string, bytes -> bytes, numpy arrays -> arrays of their shape, lists -> variable-length
# arrays) and enforces it on every row. Field names: letters, digits and _, not starting with a digit.
#
# Types: bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32,
# float64, string, bytes. "shape" makes an array: a fixed shape of more than 16 elements, such as
# [28, 28], is a tensor (the array's raw bytes, fast to write and read); a smaller one, such as
# [8], is a fixed-size list; -1 in the shape (as in [-1]) is a variable-length array. Strings and
# bytes take shapes too ({"type": "string", "shape": [-1]} is a list of strings). "nullable": True
# allows None. A pyarrow.Schema works too.
# ------------------------------------------------------------------------------------------------


def schema():
    return {
        "id": {"type": "int64"},
        "label": {"type": "int32"},
        "file_name": {"type": "string"},
        "data": {"type": "bytes"},
        "feature": {"type": "float32", "shape": [8]},
        "tokens": {"type": "uint16", "shape": [-1]},
    }


# ------------------------------------------------------------------------------------------------
# Required: the rows of one task.
#
# task_id runs from 0 to task_number() - 1. Yield one dict per row, with exactly the schema's
# fields. Values can be Python values (int, float, str, bytes), numpy scalars and numpy arrays.
# recordmill runs tasks in parallel worker processes, so open your files here, not at import time.
#
# The rows of the whole dataset are task 0's rows in the order yielded, then task 1's, and so
# on, whatever the number of workers; pass --shuffle --seed S to write them in a seeded random
# order instead.
# ------------------------------------------------------------------------------------------------


def dict_data(task_id, options):
    rng = np.random.default_rng(task_id)  # seeded, so every run writes the same data
    for i in range(options.rows_per_task):
        row_id = task_id * options.rows_per_task + i
        yield {
            "id": row_id,
            "label": row_id % 10,
            "file_name": f"task{task_id}/sample_{i:05d}.bin",
            "data": rng.bytes(32),
            "feature": rng.standard_normal(8, dtype=np.float32),
            "tokens": rng.integers(0, 1000, size=int(rng.integers(1, 12)), dtype=np.uint16),
        }
