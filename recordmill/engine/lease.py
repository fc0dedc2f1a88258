"""One run per output on S3: a lease object beside the output, taken with a conditional write.

A local disk has ``flock`` (see output.py); object stores have no locks, but S3 has conditional
writes: ``PutObject`` with ``If-None-Match: *`` creates the lease only when there is none, and
with ``If-Match: ETAG`` renews or takes it over only when it is still the one read. So of two runs
started together exactly one gets the lease; the other is refused before it touches anything.

The holder renews its lease in a thread every ``RENEW_SECONDS``; a lease not renewed for
``LEASE_SECONDS`` (S3's own clock: the object's Last-Modified against the reply's Date) belongs to
a run that died, and the next run takes it over. A run killed on this machine is seen dead at
once (its process is gone), so its ``--resume`` need not wait.

A run paused for longer than the lease (SIGSTOP, a suspended machine) may find, when it goes on,
that another run took the lease over and now writes the output, in the same staging folder. So
every write that changes the staging folder or the output, in the workers too, first checks that
the lease object is still this run's (:class:`LeaseGuard`, the stores' ``guard``): a run that
lost it stops at once (:class:`~recordmill.errors.LeaseLost`) and deletes nothing, since what is
there is the other run's now. (A write that a pause splits from its check is not covered: S3
has no condition that ties one object's write to another object.)

It needs ``boto3`` (``pip install 'recordmill[s3]'``); other object stores get no lease.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from email.utils import parsedate_to_datetime
from typing import Any

from recordmill.dataset import layout
from recordmill.dataset.storage import Store
from recordmill.errors import LeaseLost, OutputError

# The fault tests shorten the lease (as RECORDMILL_KILL_AT stops a run at a commit step), so
# that a run paused past it takes seconds, not minutes.
LEASE_SECONDS = float(os.environ.get("RECORDMILL_LEASE_SECONDS", 60.0))
RENEW_SECONDS = LEASE_SECONDS / 4
# A check that found the lease this run's stands for this long: the writes of a task come in
# bursts, and a request before each one was a quarter of a run's requests. Another run can take the
# lease only when it has gone LEASE_SECONDS unrenewed, so this adds 1/60 of that to the window
# any check-then-write has.
CHECK_STANDS_SECONDS = LEASE_SECONDS / 60
TAKEN = "another run took it over"
LOST = (
    "another run took over this output's lease after this run stopped renewing it (s3://{}/{}): "
    "this run stops, and leaves the output to the run that holds the lease now"
)


class LeaseGuard:
    """Whether this run still holds its lease: called before each write to the staging folder
    or the output (a :class:`~recordmill.dataset.storage.Store`'s ``guard``). It travels to the
    workers, and reads the lease object with the output's own pyarrow filesystem (a worker needs
    no boto3 client: making one cost each worker 0.2 s of CPU); an answer stands for
    ``CHECK_STANDS_SECONDS``. The lease is this run's while its body names this run: a run that
    takes it over writes its own name."""

    def __init__(self, final: Store, bucket: str, key: str, run: str):
        self.final, self.bucket, self.key, self.run = final, bucket, key, run
        self._checked = (-CHECK_STANDS_SECONDS, 0.0)  # (monotonic, wall clock) of the last check

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_checked": (-CHECK_STANDS_SECONDS, 0.0)}

    def __call__(self) -> None:
        # Both clocks: the monotonic one stands still while the machine is suspended, and the
        # wall clock may be set back.
        now = (time.monotonic(), time.time())
        if all(0 <= b - a < CHECK_STANDS_SECONDS for a, b in zip(self._checked, now, strict=True)):
            return
        self._check()
        self._checked = now

    def _check(self) -> None:
        where = f"{self.bucket}/{self.key}"
        try:
            with self.final.fs.open_input_stream(where) as f:
                body = f.read()
        except FileNotFoundError:  # the other run finished and let go of it
            raise LeaseLost(LOST.format(self.bucket, self.key)) from None
        except OSError as e:
            raise OutputError(f"cannot check the lease s3://{where}: {e}") from e
        if _holder(body).get("run") != self.run:
            raise LeaseLost(LOST.format(self.bucket, self.key))


class Lease:
    """The lease on an S3 output, held from :meth:`take` to :meth:`release`."""

    def __init__(self, final: Store, client: Any, key: str, body: bytes, etag: str):
        self.bucket, _, self.key = key.partition("/")
        self._client, self._body, self._etag = client, body, etag
        self.guard = LeaseGuard(final, self.bucket, self.key, json.loads(body)["run"])
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_often, daemon=True)
        self._thread.start()

    @staticmethod
    def take(final: Store) -> Lease | None:
        """Take the lease on ``final`` (None on stores other than S3), or refuse the run."""
        if final.fs.type_name != "s3":
            return None
        client = _client(final)
        where = final.sibling(layout.lease_file(final.name)).root
        bucket, _, key = where.partition("/")
        body = json.dumps(
            {"run": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid()}
        ).encode()
        errors = client.exceptions
        try:
            reply = client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            return Lease(final, client, where, body, reply["ETag"])
        except errors.ClientError as e:
            if not _precondition_failed(e):
                raise OutputError(f"cannot take the lease s3://{bucket}/{key}: {e}") from e
        try:
            held = client.get_object(Bucket=bucket, Key=key)
        except errors.NoSuchKey:  # released between the two calls: try once more
            reply = client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
            return Lease(final, client, where, body, reply["ETag"])
        holder = _holder(held["Body"].read())
        if not _expired(held, holder):
            raise OutputError(
                f"another recordmill run is writing {final} (pid {holder.get('pid')} on "
                f"{holder.get('host')} holds s3://{bucket}/{key}, renewed every "
                f"{RENEW_SECONDS:.0f} s); wait for it to finish. A run that was killed elsewhere "
                f"lets go of it {LEASE_SECONDS:.0f} s after it died"
            )
        try:
            reply = client.put_object(Bucket=bucket, Key=key, Body=body, IfMatch=held["ETag"])
        except errors.ClientError as e:
            if _precondition_failed(e):
                raise OutputError(
                    f"another recordmill run took over s3://{bucket}/{key} just now; wait for "
                    "it to finish"
                ) from None
            raise
        return Lease(final, client, where, body, reply["ETag"])

    def _renew_often(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            self._renew()

    def _renew(self) -> None:
        if self._lost:
            return
        try:
            reply = self._client.put_object(
                Bucket=self.bucket, Key=self.key, Body=self._body, IfMatch=self._etag
            )
            self._etag = reply["ETag"]
        except Exception as e:  # any failure to renew means the lease may be gone
            if _precondition_failed(e):
                self._lost = TAKEN
            else:
                self._lost = f"renewing it failed: {e}"

    def check(self) -> None:
        """Renew now; refuse to go on (publish) without the lease."""
        self._renew()
        if self._lost == TAKEN:
            raise LeaseLost(LOST.format(self.bucket, self.key))
        if self._lost:
            raise LeaseLost(
                f"this run lost its lease s3://{self.bucket}/{self.key} ({self._lost}), so it "
                "does not publish; the run that holds it now writes the output"
            )

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        if not self._lost:
            with contextlib.suppress(Exception):
                self._client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self._etag)


def _client(final: Store) -> Any:
    try:
        import boto3
    except ImportError:
        raise OutputError(
            f"writing to {final} needs boto3, for the lease that keeps two runs from writing one "
            "output: pip install 'recordmill[s3]'"
        ) from None
    kw = final.fs.__reduce__()[1][0]  # the S3FileSystem's own settings, from its URI
    endpoint = kw.get("endpoint_override") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "://" not in endpoint:
        endpoint = f"{kw.get('scheme') or 'https'}://{endpoint}"
    return boto3.client(
        "s3",
        endpoint_url=endpoint or None,
        region_name=kw.get("region") or None,
        aws_access_key_id=kw.get("access_key") or None,
        aws_secret_access_key=kw.get("secret_key") or None,
        aws_session_token=kw.get("session_token") or None,
    )


def _precondition_failed(error: Exception) -> bool:
    response = getattr(error, "response", None) or {}
    return response.get("Error", {}).get("Code") in ("PreconditionFailed", "412")


def _holder(body: bytes) -> dict[str, Any]:
    """The run a lease object's body names, its host and pid."""
    try:
        found = json.loads(body)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _expired(held: dict[str, Any], holder: dict[str, Any]) -> bool:
    """Whether a lease belongs to a run that died: a process gone on this machine, or not renewed
    for ``LEASE_SECONDS`` by S3's clock."""
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
        try:
            os.kill(holder["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
    date = held["ResponseMetadata"]["HTTPHeaders"].get("date")
    if not date:
        return False
    age = parsedate_to_datetime(date) - held["LastModified"]
    return age.total_seconds() > LEASE_SECONDS
