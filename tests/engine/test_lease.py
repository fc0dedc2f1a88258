"""The S3 lease against a run that outlives it: paused (SIGSTOP) for longer than the lease while
a --resume takes the lease over, then continued (SIGCONT). The lease is shortened for the test
(RECORDMILL_LEASE_SECONDS) so that the pause takes seconds. And against S3 failing, or another
run acting, between two of a run's requests on the lease (a fault the test proxy injects)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import boto3
import pytest

import recordmill
from recordmill.dataset import layout
from recordmill.dataset.storage import Store
from recordmill.read.verify import verify
from tests.conftest import ENDS_WITHIN, REPO, make_plugin
from tests.s3proxy import CountingProxy, Fault

LEASE_SECONDS = 3

PLUGIN = """
    import time

    def task_number():
        return 16

    def dict_data(task_id):
        time.sleep(0.5)
        for i in range(20):
            yield {"task": task_id, "i": i, "blob": bytes([task_id]) * 200}
"""


def start(plugin, uri, *extra):
    """A writer in a process group of its own (its workers and fork server with it)."""
    return subprocess.Popen(
        [
            *(sys.executable, REPO / "writer.py", "--script", plugin, "--output", uri),
            *("--workers", "2", "--partitions", "2", "--on-bad-input", "skip", "--quiet", *extra),
        ],
        env={**os.environ, "RECORDMILL_LEASE_SECONDS": str(LEASE_SECONDS)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_until(condition, process, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, (what, process.communicate())
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.1)


def lease_of(uri: str) -> tuple[Any, str, str]:
    """A boto3 client of the server of ``uri``, and the bucket and key of its output's lease."""
    store = Store.at(uri)
    bucket, _, key = store.sibling(layout.lease_file(store.name)).root.partition("/")
    endpoint = "http://" + uri.split("endpoint_override=")[1].split("&")[0]
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"), bucket, key


def lease_body(uri: str) -> dict[str, Any] | None:
    """What the output's lease object holds (its run, host and pid), or None when there is none."""
    client, bucket, key = lease_of(uri)
    try:
        return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    except client.exceptions.NoSuchKey:
        return None


def lease_holder(uri: str) -> int | None:
    """The pid that the output's lease object names, or None when there is none."""
    body = lease_body(uri)
    return None if body is None else body["pid"]


def finished_tasks(uri: str) -> int:
    store = Store.at(uri)
    return len(store.sibling(layout.staging_folder(store.name)).listdir(layout.TASKS_DIR))


def test_a_run_paused_past_its_lease_stops_and_deletes_nothing(s3, tmp_path):
    """Issue 31: a run paused longer than the lease, continued after a --resume had taken the
    lease over, went on writing into the staging folder the new holder owned; both runs failed
    and all staged work was deleted. Now the paused run stops at its first write, with one
    line, and the run holding the lease finishes."""
    plugin = make_plugin(tmp_path / "slow", PLUGIN)
    uri = s3("lease/paused")
    first = start(plugin, uri)
    wait_until(lambda: finished_tasks(uri) >= 2, first, "two finished tasks")
    os.killpg(first.pid, signal.SIGSTOP)
    try:
        time.sleep(LEASE_SECONDS + 1)
        second = start(plugin, uri, "--resume")
        wait_until(lambda: lease_holder(uri) == second.pid, second, "the lease taken over")
        wait_until(lambda: finished_tasks(uri) >= 4, second, "the resume at work")
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    _, paused = first.communicate(timeout=ENDS_WITHIN)
    _, stderr = second.communicate(timeout=120)
    assert second.returncode == 0, (stderr, paused)
    lines = paused.strip().splitlines()
    assert first.returncode == 1 and len(lines) == 1, paused
    assert "another run took over this output's lease after this run stopped" in lines[0]
    assert verify(uri) == []
    table = recordmill.open(uri).to_arrow()
    assert sorted(zip(table["task"].to_pylist(), table["i"].to_pylist(), strict=True)) == [
        (t, i) for t in range(16) for i in range(20)
    ]
    assert lease_holder(uri) is None  # the holder let it go; the paused run deleted nothing


def test_a_live_run_keeps_its_lease_past_the_lease_time_while_it_renews(s3, tmp_path, monkeypatch):
    release = tmp_path / "release"  # the first run's tasks wait until the test is done with it
    monkeypatch.setenv("RECORDMILL_TEST_RELEASE", str(release))
    slow = make_plugin(
        tmp_path / "slow",
        """
    import os, time

    def task_number():
        return 4

    def dict_data(task_id):
        while not os.path.exists(os.environ["RECORDMILL_TEST_RELEASE"]):
            time.sleep(0.05)
        yield {"task": task_id}
""",
    )
    uri = s3("live/out")
    first = start(slow, uri)
    try:
        wait_until(lambda: lease_holder(uri) is not None, first, "the first run's lease")
        time.sleep(2 * LEASE_SECONDS)  # past the lease: only its renewals keep it
        assert first.poll() is None, "the first run should still be running"
        second = start(slow, uri, "--resume")
        out, err = second.communicate(timeout=ENDS_WITHIN)
        assert second.returncode == 1, (out, err)
        assert "another recordmill run is writing" in err and f"(pid {first.pid} on" in err, err
        assert lease_holder(uri) == first.pid
    finally:
        release.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert recordmill.open(uri).to_arrow().num_rows == 4


def test_a_lease_that_cannot_be_taken_is_named(s3, tmp_path):
    from tests.conftest import make_plugin

    plugin = make_plugin(
        tmp_path / "p",
        """
        def task_number():
            return 1

        def dict_data(task_id):
            yield {"x": 1}
        """,
    )
    uri = s3("lease/nobucket").replace("s3://data/", "s3://no-such-bucket/")
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.write(plugin, uri, workers=0, progress=False)
    assert str(caught.value) == (
        "cannot take the lease s3://no-such-bucket/lease/.nobucket.recordmill-lease: An error "
        "occurred (NoSuchBucket) when calling the PutObject operation: The specified bucket does "
        "not exist"
    )


# --- S3 failing, or another run acting, between two of the lease's requests (tests/s3proxy.py
# injects it): each run is refused, and the dataset it was to replace stays whole.

ROWS = """
    def add_options(parser):
        parser.add_argument("--start", type=int, default=0)

    def task_number():
        return 2

    def dict_data(task_id, options):
        for i in range(3):
            yield {"id": options.start + 3 * task_id + i}
"""


@pytest.fixture
def proxied(s3, tmp_path, request):
    """A dataset on S3 (ids 0 to 5) named after the test, a proxy in front of the server, and
    its lease object's ``bucket/key`` (the proxy's faults name it)."""
    plugin = make_plugin(tmp_path / "rows", ROWS)
    uri = s3(f"lease/{request.node.name}")
    recordmill.write(plugin, uri, workers=0, progress=False)
    proxy = CountingProxy.in_front_of(uri)
    _, bucket, key = lease_of(uri)
    yield plugin, uri, proxy, f"{bucket}/{key}"
    proxy.close()


def overwrite_refused(plugin, uri: str, proxy: CountingProxy) -> str:
    """The message of a run refused as it writes other rows over ``uri``, through ``proxy``;
    the dataset there before, whole."""
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.write(
            plugin,
            proxy.through(uri),
            options={"start": 100},
            overwrite=True,
            workers=0,
            progress=False,
        )
    assert sorted(recordmill.open(uri).to_arrow()["id"].to_pylist()) == list(range(6))
    assert verify(uri) == []
    return str(caught.value)


def test_a_lease_that_s3_refuses_to_read_stops_the_run(proxied):
    """S3 refuses to read the lease (AccessDenied: the run's permissions changed): the run
    cannot tell whether it still holds it, so it writes nothing."""
    plugin, uri, proxy, lease = proxied
    bucket, _, key = lease.partition("/")
    fault = proxy.inject(Fault("HEAD", f"/{lease}"))
    assert overwrite_refused(plugin, uri, proxy) == (
        f"cannot check the lease s3://{lease}: When reading information for key '{key}' in "
        f"bucket '{bucket}': AWS Error ACCESS_DENIED during HeadObject operation: No response "
        "body."
    )
    assert fault.done == 1 and lease_body(uri) is None  # refused at its first check; let go


def test_a_lease_that_cannot_be_renewed_is_lost_and_nothing_published(proxied):
    """S3 refuses the renewal before the run publishes: the lease may be another run's by now,
    so the run publishes nothing, and leaves the lease object as it is."""
    plugin, uri, proxy, lease = proxied
    # The run's first PUT takes the lease; the second, that renews it before the run publishes,
    # is refused.
    fault = proxy.inject(Fault("PUT", f"/{lease}", first=2))
    assert overwrite_refused(plugin, uri, proxy) == (
        f"this run lost its lease s3://{lease} (renewing it failed: An error occurred "
        "(AccessDenied) when calling the PutObject operation: injected by the test proxy), so it "
        "does not publish; the run that holds it now writes the output"
    )
    assert fault.done == 1 and lease_holder(uri) == os.getpid()


def test_a_lease_taken_over_by_another_run_between_two_requests_is_refused(proxied):
    """The lease of a run that died, taken over by another run between this run's read of it
    and its conditional write: the write fails (the lease is not the one read), and the run is
    refused; the lease is the other run's."""
    plugin, uri, proxy, lease = proxied
    client, bucket, key = lease_of(uri)
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    died = {"run": "died", "host": socket.gethostname(), "pid": dead.pid}
    client.put_object(Bucket=bucket, Key=key, Body=json.dumps(died).encode())
    other = {"run": "other", "host": "elsewhere", "pid": 1}

    def takes() -> None:
        client.put_object(Bucket=bucket, Key=key, Body=json.dumps(other).encode())

    # The run's first PUT (if there is no lease) fails; the other run acts before its second,
    # which takes the dead run's lease over.
    fault = proxy.inject(Fault("PUT", f"/{lease}", first=2, times=1, before=takes))
    assert overwrite_refused(plugin, uri, proxy) == (
        f"another recordmill run took over s3://{lease} just now; wait for it to finish"
    )
    assert fault.done == 1 and lease_body(uri) == other


def test_the_lease_is_renewed_at_its_renewal_interval_not_its_length(proxied, monkeypatch):
    """The cadence itself, observed: each renewal (a PUT of the lease) comes RENEW_SECONDS after
    the one before, a quarter of the lease's length, so that a lease never lapses between two
    renewals of a live run (renewed at its own length, it could, and another run take over)."""
    from recordmill.engine import lease as lease_module

    monkeypatch.setattr(lease_module, "LEASE_SECONDS", 2.0)
    monkeypatch.setattr(lease_module, "RENEW_SECONDS", 0.5)
    _, uri, _, _ = proxied
    renewed: list[float] = []
    renew = lease_module.Lease._renew
    monkeypatch.setattr(
        lease_module.Lease, "_renew", lambda self: renewed.append(time.monotonic()) or renew(self)
    )
    held = lease_module.Lease.take(Store.at(uri))
    began = time.monotonic()
    try:
        deadline = began + ENDS_WITHIN
        while len(renewed) < 4:  # waits on the renewals themselves, however busy the machine
            assert time.monotonic() < deadline, renewed
            time.sleep(0.05)
    finally:
        held.release()
    gaps = [b - a for a, b in zip([began, *renewed[:-1]], renewed, strict=True)]
    assert all(gap >= 0.45 for gap in gaps), gaps  # not more often than the interval
    assert min(gaps) < 1.0 and sorted(gaps)[len(gaps) // 2] < 1.0, gaps  # nor at the lease's 2 s
    assert lease_holder(uri) is None  # released: the next run takes it at once
