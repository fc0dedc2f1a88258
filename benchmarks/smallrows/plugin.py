"""Benchmark plugin: many small rows (int64 id, int32 label, 16 float32, a short string)."""

import numpy as np


def add_options(parser):
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows in all (default: 2M)")
    parser.add_argument("--tasks", type=int, default=32, help="tasks (default: 32)")


def task_number(options):
    return options.tasks


def task_rows(task_id, options):
    return options.rows // options.tasks


def schema():
    return {
        "id": {"type": "int64"},
        "label": {"type": "int32"},
        "feature": {"type": "float32", "shape": [16]},
        "name": {"type": "string"},
    }


def rows(task_id, options):
    """The rows of one task; the plain-loop baseline uses the same generator."""
    per_task = options.rows // options.tasks
    start = task_id * per_task
    features = np.random.default_rng(task_id).standard_normal((per_task, 16), dtype=np.float32)
    for i in range(per_task):
        yield {
            "id": start + i,
            "label": (start + i) % 1000,
            "feature": features[i],
            "name": f"row-{start + i}",
        }


def dict_data(task_id, options):
    return rows(task_id, options)
