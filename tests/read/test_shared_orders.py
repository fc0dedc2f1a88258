"""Epoch orders drawn once a machine: the same order every process would draw, drawn by one."""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from recordmill.read import order
from recordmill.read.machine import cache_folder, shared_orders
from recordmill.read.machine.shared_orders import Orders, shared_order
from tests.conftest import ENDS_WITHIN

ROWS = 5000


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """The order draws of this test, counted in a log (each line: pid rows)."""
    monkeypatch.setattr(shared_orders, "SHARE_ROWS", 1000)
    log = tmp_path / "drawn"
    monkeypatch.setenv("RECORDMILL_ORDER_LOG", str(log))
    return lambda: log.read_text().splitlines() if log.exists() else []


def order_files(orders: Orders) -> list[str]:
    return sorted(p.name for p in orders.folder.iterdir() if p.suffix == ".order")


def draw_in_a_process(cache, rows, seed, out):
    out.put(order.permutation(rows, seed, orders=Orders(cache)).tolist())


def results_of(workers, out) -> list:
    """What each worker put in ``out``; failing as soon as one ends without putting it (a
    process that failed is not waited for)."""
    results, deadline = [], time.monotonic() + ENDS_WITHIN
    while len(results) < len(workers):
        try:
            results.append(out.get(timeout=0.1))
        except queue.Empty:
            failed = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            assert not failed, f"a drawing process failed: exit codes {failed}"
            assert time.monotonic() < deadline, "the drawing processes never ended"
    return results


def test_a_large_order_is_numpys_drawn_once_for_every_process(drawn, tmp_path):
    expected = np.random.default_rng(7).permutation(ROWS).tolist()
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    workers = [
        context.Process(target=draw_in_a_process, args=(tmp_path / "c", ROWS, 7, out), daemon=True)
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    results = results_of(workers, out)
    for w in workers:
        w.join()
    assert all(r == expected for r in results)
    assert len(drawn()) == 1  # four processes at once: one drew, three waited and mapped it
    mine = order.permutation(ROWS, 3, epoch=4, orders=Orders(tmp_path / "c"))
    assert mine.tolist() == expected and len(drawn()) == 1  # seed + epoch: the same order
    assert not mine.flags.writeable  # the machine's copy: no process may change it


def test_small_orders_and_no_folder_are_drawn_in_each_process(drawn, tmp_path):
    small = order.permutation(999, 1, orders=Orders(tmp_path / "c"))
    assert not small.flags.writeable and len(drawn()) == 1  # read-only as a shared one is
    assert not (tmp_path / "c").exists()  # nothing made for an order drawn here
    unshared = order.permutation(ROWS, 1, orders=None)
    assert unshared.tolist() == np.random.default_rng(1).permutation(ROWS).tolist()
    assert len(drawn()) == 2
    at_the_bound = order.permutation(1000, 1, orders=Orders(tmp_path / "c"))  # SHARE_ROWS: shared
    assert len(drawn()) == 3 and len(order_files(Orders(tmp_path / "c"))) == 1
    assert (
        at_the_bound.tolist() == order.permutation(1000, 1, orders=Orders(tmp_path / "c")).tolist()
    )
    assert len(drawn()) == 3  # mapped, not drawn again


def test_a_block_order_is_shared_by_what_shapes_it(drawn, tmp_path):
    orders = Orders(tmp_path / "c")
    parts = [(k * 500, (k + 1) * 500) for k in range(10)]
    first = order.block_order(parts, 4, seed=2, epoch=1, orders=orders)
    assert first.tolist() == order.block_order(parts, 4, seed=2, epoch=1).tolist()
    assert order.block_order(parts, 4, 2, 1, orders).tolist() == first.tolist()
    assert len(drawn()) == 2  # the second was drawn here (no orders), the third mapped
    other = order.block_order(parts, 6, 2, 1, orders)  # another capacity: another order
    assert other.tolist() != first.tolist() and len(drawn()) == 3
    assert len(order_files(orders)) == 2


def test_what_is_not_a_whole_order_of_this_users_is_not_used(drawn, tmp_path):
    orders = Orders(tmp_path / "c")
    expected = order.permutation(ROWS, 5, orders=orders).tolist()
    (name,) = order_files(orders)
    path = orders.folder / name
    path.write_bytes(path.read_bytes()[:-3])  # a part of a row
    assert order.permutation(ROWS, 5, orders=orders).tolist() == expected
    assert len(drawn()) == 2 and path.stat().st_size == 8 * ROWS  # drawn and written again
    path.write_bytes(path.read_bytes()[:-8])  # whole rows, one short
    assert order.permutation(ROWS, 5, orders=orders).tolist() == expected
    assert len(drawn()) == 3 and path.stat().st_size == 8 * ROWS
    path.unlink()
    target = tmp_path / "planted"
    target.write_bytes(np.zeros(ROWS, np.int64).tobytes())
    path.symlink_to(target)  # a link planted in its place is not followed
    assert order.permutation(ROWS, 5, orders=orders).tolist() == expected
    assert len(drawn()) == 4 and target.read_bytes() == np.zeros(ROWS, np.int64).tobytes()


def test_an_unsafe_folder_is_not_used_and_said_once(drawn, tmp_path, caplog, monkeypatch):
    cache = tmp_path / "c"
    (cache / f"user-{os.geteuid()}").mkdir(parents=True, mode=0o777)
    os.chmod(cache / f"user-{os.geteuid()}", 0o777)
    monkeypatch.setattr(cache_folder, "_SAID", set())  # said once a process: not yet
    with caplog.at_level(logging.WARNING, logger="recordmill"):
        for seed in (1, 2):
            got = order.permutation(ROWS, seed, orders=Orders(cache)).tolist()
            assert got == np.random.default_rng(seed).permutation(ROWS).tolist()
    said = [r.getMessage() for r in caplog.records]
    mine = cache / f"user-{os.geteuid()}"
    assert said == [
        f"epoch orders are drawn in each process, {mine / 'orders'} not used: {mine} may be "
        "read or written by other users (mode drwxrwxrwx): it is not used as this user's disk "
        "cache"
    ]
    assert len(drawn()) == 2
    assert not (cache / f"user-{os.geteuid()}" / "orders").exists()


def test_the_least_recently_used_orders_go_past_the_limit(drawn, tmp_path, monkeypatch):
    monkeypatch.setattr(shared_orders, "ORDERS_BYTES", 2 * 8 * ROWS)
    orders = Orders(tmp_path / "c")
    for seed in range(3):
        order.permutation(ROWS, seed, orders=orders)
        time.sleep(0.01)  # times a filesystem tells apart
    order.permutation(ROWS, 0, orders=orders)  # used again: now the most recent
    time.sleep(0.01)
    order.permutation(ROWS, 3, orders=orders)  # over the limit: seed 1's goes, 0's stays
    assert len(order_files(orders)) == 3 and len(drawn()) == 4
    locks = [p for p in orders.folder.iterdir() if p.suffix == ".lock"]
    assert sorted(p.name[: -len(".lock")] for p in locks) == order_files(orders)  # gone with it
    order.permutation(ROWS, 0, orders=orders)
    assert len(drawn()) == 4
    order.permutation(ROWS, 1, orders=orders)
    assert len(drawn()) == 5


def test_as_many_orders_go_as_the_limit_needs(drawn, tmp_path, monkeypatch):
    orders = Orders(tmp_path / "c")
    for seed in range(3):
        order.permutation(ROWS, seed, orders=orders)
        time.sleep(0.01)  # times a filesystem tells apart
    assert len(order_files(orders)) == 3
    monkeypatch.setattr(shared_orders, "ORDERS_BYTES", 8 * ROWS)  # one order beside the new
    order.permutation(ROWS, 3, orders=orders)  # seeds 0 and 1 go: two past the limit
    assert len(order_files(orders)) == 2 and len(drawn()) == 4
    order.permutation(ROWS, 2, orders=orders)  # kept: the most recent of the three
    assert len(drawn()) == 4


def test_a_draw_killed_or_failed_leaves_no_order(drawn, tmp_path):
    orders = Orders(tmp_path / "c")
    key = ("killed",)

    started = tmp_path / "started"

    def slow():
        started.touch()
        time.sleep(60)
        return np.arange(ROWS)

    def fails():
        raise RuntimeError("no order")

    child = os.fork()
    if child == 0:  # the killed one, in the middle of its draw
        try:
            shared_order(orders, ROWS, key, slow)
        finally:
            os._exit(1)
    deadline = time.monotonic() + ENDS_WITHIN
    while not started.exists():  # drawing, under the order's lock
        assert time.monotonic() < deadline, "the draw never started"
        time.sleep(0.01)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    with pytest.raises(RuntimeError, match="no order"):
        shared_order(orders, ROWS, key, fails)
    assert order_files(orders) == []
    leftover = orders.folder / f".x.order.{child}.partial"  # as a process killed writing leaves
    leftover.write_bytes(b"1234")
    assert shared_order(orders, ROWS, key, lambda: np.arange(ROWS)).tolist() == list(range(ROWS))
    (name,) = order_files(orders)
    # What the killed process left (its partial, as the leftover) is gone: the order and its lock.
    assert sorted(p.name for p in orders.folder.iterdir()) == [name, f"{name}.lock"]


def test_another_numpy_draws_its_own(drawn, tmp_path, monkeypatch):
    """numpy's Generator may draw other numbers from a seed in another version."""
    orders = Orders(tmp_path / "c")
    order.permutation(ROWS, 1, orders=orders)
    monkeypatch.setattr(np, "__version__", "0.0.0")
    order.permutation(ROWS, 1, orders=orders)
    assert len(drawn()) == 2 and len(order_files(orders)) == 2


def test_an_order_is_on_disk_before_it_takes_its_name(drawn, tmp_path, monkeypatch):
    """A machine that loses power must not find a named order whose rows never reached disk."""
    calls = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(("fsync", fd)) or fsync(fd))
    monkeypatch.setattr(
        os, "replace", lambda a, b, **kw: calls.append(("replace", b)) or replace(a, b, **kw)
    )
    orders = Orders(tmp_path / "c")
    order.permutation(ROWS, 1, orders=orders)
    (name,) = order_files(orders)
    assert [c[0] for c in calls] == ["fsync", "replace"]
    assert calls[1][1] == name


def test_an_error_while_drawing_is_that_error_and_leaves_nothing(drawn, tmp_path):
    orders = Orders(tmp_path / "c")
    with pytest.raises(ValueError, match="negative"):  # numpy's, for a seed below 0
        order.permutation(ROWS, -5, orders=orders)
    assert [p.name for p in orders.folder.iterdir() if not p.name.endswith(".lock")] == []


FULL_DISK = """
import logging, sys
import numpy as np
from recordmill.read import order
from recordmill.read.machine import cache_folder, shared_orders
logging.basicConfig(level=logging.WARNING, format="%(message)s")
shared_orders.SHARE_ROWS = 1000
got = order.permutation(100_000, 3, orders=shared_orders.Orders(sys.argv[1]))
assert got.tolist() == np.random.default_rng(3).permutation(100_000).tolist()
print("drawn in memory")
"""


def test_a_disk_too_full_for_an_order_draws_it_in_memory(tmp_path):
    """Written through a mapping, an order on a full disk would kill the process (SIGBUS)."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)])
    if mounted.returncode:
        pytest.skip("a small filesystem cannot be mounted here (not root)")
    try:
        done = subprocess.run(
            [sys.executable, "-c", FULL_DISK, str(small)], capture_output=True, text=True
        )
    finally:
        subprocess.run(["umount", str(small)], check=True)
    assert done.returncode == 0, done.stderr  # not -7 (SIGBUS)
    assert done.stdout.strip() == "drawn in memory"
    assert "not used: [Errno 28] No space left on device" in done.stderr


BASE = {
    "parts": [(k * 500, (k + 1) * 500) for k in range(10)],
    "capacity": 4,
    "seed": 2,
    "epoch": 1,
}


@pytest.mark.parametrize(
    "change",
    [
        {"parts": [(k * 250, (k + 1) * 250) for k in range(20)]},  # the same rows, other parts
        {"capacity": 6},  # (4 and 5 draw alike: blocks of half the parts it holds)
        {"seed": 3},
        {"epoch": 2},
    ],
    ids=lambda change: next(iter(change)),
)
def test_every_field_of_a_block_orders_key_names_its_own_order(drawn, tmp_path, change):
    """Each setting that shapes a block order, changed alone, maps its own order: one left out of
    the key would hand this setting the order drawn for the other (another epoch's rows)."""
    orders = Orders(tmp_path / "c")
    first = order.block_order(**BASE, orders=orders)
    changed = {**BASE, **change}
    other = order.block_order(**changed, orders=orders)
    assert other.tolist() == order.block_order(**changed).tolist()  # as drawn without sharing
    assert other.tolist() != first.tolist() and len(order_files(orders)) == 2


@pytest.mark.parametrize(
    "change", [{"seed": 6}, {"until": "all_exhausted"}, {"rows": 1500}, {"epoch": 1}], ids=str
)
def test_every_field_of_a_mixtures_order_key_names_its_own_order(drawn, tmp_path, change):
    import recordmill
    from tests.conftest import make_plugin

    plugin = make_plugin(
        tmp_path / "p",
        "def task_number():\n    return 2\n\n"
        "def dict_data(task_id):\n    for i in range(700):\n        yield {'i': task_id * 700 + i}\n",
    )
    paths = [tmp_path / "a", tmp_path / "b"]
    for path in paths:
        recordmill.write(plugin, path, progress=False)
    cache = tmp_path / "cache"
    settings = {"seed": 5, "until": "first_exhausted", "rows": None}
    change = dict(change)
    epoch = change.pop("epoch", 0)

    def drawn_order(shared, epoch=0, **given):
        m = recordmill.mix([str(p) for p in paths], **given, cache_dir=cache if shared else False)
        return m.order(epoch).tolist()

    first = drawn_order(True, **settings)
    changed = {**settings, **change}
    assert drawn_order(True, epoch, **changed) == drawn_order(False, epoch, **changed)
    assert drawn_order(True, epoch, **changed) != first


def test_an_empty_order_is_kept_and_mapped_as_one(drawn, tmp_path):
    orders = Orders(tmp_path / "c")
    empty = lambda: np.zeros(0, np.int64)  # noqa: E731
    for _ in range(2):  # drawn, then found
        got = orders.get("empty", empty)
        assert got.dtype == np.int64 and got.tolist() == [] and not got.flags.writeable
    assert order_files(orders) == ["empty.order"] and len(drawn()) == 1
