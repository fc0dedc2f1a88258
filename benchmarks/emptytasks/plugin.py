"""Benchmark plugin: many tasks that yield no row (what each task costs recordmill itself)."""


def add_options(parser):
    parser.add_argument("--tasks", type=int, default=1_000_000, help="tasks (default: 1M)")


def task_number(options):
    return options.tasks


def schema():
    return {"id": {"type": "int64"}}


def dict_data(task_id):
    return ()
