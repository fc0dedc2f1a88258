"""The commit is safe to die in at every step: the run is killed (SIGKILL) at each named step of
output.py's protocol, locally and on S3, for a first write, an --overwrite and an --append, and
must then finish with the reference checksums, never publish a stale file, and never refuse or
lose a complete dataset."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

import recordmill
from recordmill.dataset import layout
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.storage import Store
from recordmill.engine.commit import KILL_AT
from recordmill.read.verify import verify
from tests.conftest import make_plugin, run_writer, write_here

PLUGIN = """
    def add_options(parser):
        parser.add_argument("--scale", type=int, default=1)

    def task_number(options):
        return 6

    def schema(options):
        return {"task": {"type": "int32"}, "value": {"type": "int64"}, "blob": {"type": "bytes"}}

    def dict_data(task_id, options):
        for i in range(10 + task_id):
            yield {"task": task_id, "value": i * options.scale, "blob": bytes([i]) * 300}
"""

FRESH_STEPS = ["recorded", "tasks-done", "staged", "cleaned", "published"]
LOCAL_OVERWRITE_STEPS = ["staged", "cleaned", "marked", "exchanged"]
S3_OVERWRITE_STEPS = ["staged", "cleaned", "unpublished", "cleared", "moved", "published"]
# An append's steps (engine/append.py): the dataset's files hard-linked into the staging folder,
# then the exchange; on S3 the new files moved in beside the dataset's, then the manifest.
LOCAL_APPEND_STEPS = [
    "recorded",
    "tasks-done",
    "partitions-done",
    "linked",
    "staged",
    "cleaned",
    "marked",
    "exchanged",
]
S3_APPEND_STEPS = [
    "recorded",
    "tasks-done",
    "partitions-done",
    "staged",
    "cleaned",
    "moved",
    "published",
]


def checksums(location: str) -> list[str]:
    return [p["checksum"] for p in manifest_file.read(location)["partitions"]]


def writer_args(plugin, output) -> list:
    # --on-bad-input skip: rows go through the tasks phase (so its step exists) as well
    args = ["--script", plugin, "--output", output, "--partitions", "3", "--workers", "2"]
    return [*args, "--quiet", "--on-bad-input", "skip"]


def write(plugin, output, *extra, kill_at=None):
    env = {KILL_AT: kill_at} if kill_at else None
    return run_writer(*writer_args(plugin, output), *extra, env=env)


def api_write(plugin, output, scale: int, **settings) -> None:
    """:func:`write`'s run through the Python API, in this process, whose fork server (started
    once) spares the run a writer process of its own: for what is not killed."""
    recordmill.write(
        plugin,
        output,
        options={"scale": scale},
        partitions=3,
        workers=2,
        on_bad_input="skip",
        progress=False,
        **settings,
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The plugin, and the checksums of its partitions with --scale 1 and --scale 2."""
    root = tmp_path_factory.mktemp("reference")
    plugin = make_plugin(root / "xyz", PLUGIN)
    sums = {}
    for scale in (1, 2):
        api_write(plugin, root / f"scale{scale}", scale)
        sums[scale] = checksums(str(root / f"scale{scale}"))
    assert sums[1] != sums[2]
    return plugin, sums


def older_dataset(plugin: str, location: str) -> None:
    """Put the --scale 1 dataset at ``location`` (locally or on S3) for a run to overwrite or
    append to: a copy of the one the reference fixture wrote (a run writing it again costs a
    second, and there are thirty steps)."""
    written = Path(plugin).parent / "scale1"
    if "://" not in location:
        shutil.copytree(written, location)
        return
    fs, root = pafs.FileSystem.from_uri(location)
    pafs.copy_files(str(written), root, pafs.LocalFileSystem(), fs)


@pytest.fixture(scope="module")
def appended(reference, tmp_path_factory):
    """The plugin, and the checksums of a --scale 1 dataset before and after a --scale 2 append."""
    plugin, sums = reference
    out = tmp_path_factory.mktemp("appended") / "out"
    older_dataset(plugin, str(out))
    api_write(plugin, out, 2, append=True)
    after = checksums(str(out))
    assert after[:3] == sums[1] and len(after) == 6
    return plugin, {1: sums[1], 2: after}


def leftovers(final: Store) -> list[str]:
    """What a finished run must not leave beside its output (the lock file too)."""
    names = (
        layout.staging_folder(final.name),
        layout.old_folder(final.name),
        layout.lock_file(final.name),
        layout.lease_file(final.name),
    )
    return [n for n in names if final.sibling(n).exists()]


def published_state(location: str, sums: dict[int, list[str]]) -> str:
    """What a reader finds at the output: nothing, the older dataset or the new one, whole.
    Anything else (a stale or partial dataset) fails the test."""
    store = Store.at(location)
    if not store.exists() or manifest_file.find(store) is None:
        return "none"
    # An append cut short on S3 leaves its new files beside the older version (they have new
    # names): verify names them, and the older version is whole.
    problems = [p for p in verify(location) if "which is not published" not in p]
    assert problems == [], f"a damaged dataset was published: {problems}"
    found = checksums(location)
    assert found in (sums[1], sums[2]), "a dataset with stale partitions was published"
    return "new" if found == sums[2] else "old"


def kill_then_resume(plugin, sums, location, step, overwrite, allowed=("old", "new"), append=False):
    """Kill a run writing --scale 2 at ``step``; check that what is published is ``allowed``;
    then a resume with other settings is refused, and the same run resumed finishes with the
    reference checksums."""
    flags = ["--scale", "2"] + (["--overwrite"] if overwrite else [])
    flags += ["--append"] if append else []
    killed = write(plugin, location, *flags, kill_at=step)
    assert killed.returncode == -9, f"the run did not reach step {step}: {killed.stderr}"
    state = published_state(location, sums)
    assert state in allowed

    # refused before any worker starts: in this process
    other = write_here(*writer_args(plugin, location), *flags, "--resume", "--partitions", "2")
    assert other.returncode == 1 and "--partitions: 3 then, 2 now" in other.stderr, other.stderr
    assert published_state(location, sums) == state  # the refusal changed nothing

    # The same run resumed, through the Python API in this process: what it resumes is the
    # engine's, either way (the command line's --resume: the tests below).
    api_write(plugin, location, 2, overwrite=overwrite, append=append, resume=True)
    assert checksums(location) == sums[2]
    assert verify(location) == []
    assert leftovers(Store.at(location)) == []
    # A --resume of the complete dataset it left: test_resume_of_a_finished_run_*.


@pytest.mark.parametrize("step", FRESH_STEPS)
def test_a_new_output_survives_a_kill_at_each_step(reference, tmp_path, step):
    plugin, sums = reference
    kill_then_resume(plugin, sums, str(tmp_path / "out"), step, False, ("none", "new"))


@pytest.mark.parametrize("step", LOCAL_OVERWRITE_STEPS)
def test_an_overwrite_survives_a_kill_at_each_step(reference, tmp_path, step):
    plugin, sums = reference
    out = str(tmp_path / "out")
    older_dataset(plugin, out)
    kill_then_resume(plugin, sums, out, step, overwrite=True)


@pytest.mark.parametrize("step", LOCAL_APPEND_STEPS)
def test_an_append_survives_a_kill_at_each_step(appended, tmp_path, step):
    """Killed anywhere, the last version is whole and readable; --append --resume finishes."""
    plugin, sums = appended
    out = str(tmp_path / "out")
    older_dataset(plugin, out)
    kill_then_resume(plugin, sums, out, step, False, append=True)
    assert recordmill.open(out, version=1).to_arrow().num_rows == 75


@pytest.mark.parametrize("step", S3_APPEND_STEPS)
def test_an_s3_append_survives_a_kill_at_each_step(s3, appended, step):
    """On S3 too the older version stays the dataset, whole, until the new manifest is
    written: there is no window without one."""
    plugin, sums = appended
    uri = s3(f"append/{step}")
    older_dataset(plugin, uri)
    kill_then_resume(plugin, sums, uri, step, False, append=True)
    assert recordmill.open(uri).version == 2


def test_the_older_dataset_comes_back_when_the_new_one_is_dropped(reference, tmp_path):
    """Where folders cannot be exchanged atomically, a run killed between its two renames
    leaves the older dataset aside: the next run of any kind puts it back."""
    plugin, sums = reference
    out = tmp_path / "out"
    older_dataset(plugin, str(out))
    assert write(plugin, out, "--scale", "2", "--overwrite", kill_at="cleaned").returncode == -9
    os.replace(out, tmp_path / ".out.recordmill-old")  # what the fallback's first rename does
    plain = write(plugin, out, "--scale", "2")
    assert plain.returncode == 1 and "--resume" in plain.stderr
    assert published_state(str(out), sums) == "old"
    resumed = write(plugin, out, "--scale", "2", "--overwrite", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert published_state(str(out), sums) == "new" and leftovers(Store.at(str(out))) == []


@pytest.mark.parametrize("step", S3_OVERWRITE_STEPS)
def test_an_s3_overwrite_survives_a_kill_at_each_step(s3, reference, step):
    plugin, sums = reference
    uri = s3(f"commit/{step}")
    older_dataset(plugin, uri)
    # Object stores cannot swap a folder: from the old manifest's deletion to the new one's
    # writing, the output is no dataset (never a mix, never stale files under a manifest).
    allowed = ("none", "new") if step in ("unpublished", "cleared", "moved") else ("old", "new")
    kill_then_resume(plugin, sums, uri, step, True, allowed)


def test_a_complete_output_is_not_taken_for_another_run(reference, tmp_path):
    plugin, sums = reference
    out = tmp_path / "out"
    assert write(plugin, out, "--scale", "2").returncode == 0
    other = write(plugin, out, "--scale", "3", "--resume")
    assert other.returncode == 1
    assert "complete output of another run (--scale: 2 then, 3 now)" in other.stderr
    assert checksums(str(out)) == sums[2]


@pytest.mark.parametrize("where", ["local", "s3"])
def test_an_overwrite_in_the_same_second_puts_its_own_files_in_place(
    reference, tmp_path, monkeypatch, request, where
):
    """Two runs in one second write the same manifest (it names the second it was made in); the
    second run's files still replace the first's, damaged ones among them."""
    plugin, sums = reference
    second = time.struct_time((2026, 12, 2, 19, 0, 0, 2, 336, 0))
    monkeypatch.setattr(manifest_file.time, "gmtime", lambda *_: second)
    out = (
        str(tmp_path / "out") if where == "local" else request.getfixturevalue("s3")("same-second")
    )
    api_write(plugin, out, 1)
    store = Store.at(out)
    name = manifest_file.read(out)["partitions"][0]["file"]
    damaged = bytearray(store.read_bytes(name))
    damaged[len(damaged) // 2] ^= 0xFF
    store.write_bytes(name, bytes(damaged))
    assert verify(out) != []
    api_write(plugin, out, 1, overwrite=True)
    assert checksums(out) == sums[1] and verify(out) == []


def test_an_s3_commit_cut_short_can_be_started_over(s3, reference):
    """Killed halfway through moving files in, then --overwrite without --resume: the
    half-published files are the run's own, so they are replaced, not refused."""
    plugin, sums = reference
    uri = s3("commit/again")
    older_dataset(plugin, uri)
    assert write(plugin, uri, "--scale", "2", "--overwrite", kill_at="moved").returncode == -9
    assert published_state(uri, sums) == "none"
    again = write(plugin, uri, "--scale", "2", "--overwrite")
    assert again.returncode == 0, again.stderr
    assert checksums(uri) == sums[2] and leftovers(Store.at(uri)) == []


def test_finished_partitions_are_not_written_again_on_resume(reference, tmp_path):
    """Killed with every partition written: the resume publishes those very files."""
    plugin, sums = reference
    out = tmp_path / "out"
    assert write(plugin, out, "--scale", "2", kill_at="partitions-done").returncode == -9
    staging = tmp_path / ".out.recordmill-partial"
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in staging.glob("part-*")}
    assert len(before) == 3
    assert write(plugin, out, "--scale", "2", "--resume").returncode == 0
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("part-*")}
    assert after == before and checksums(str(out)) == sums[2]


def test_a_resume_may_flush_or_not_unlike_the_run_it_finishes(reference, tmp_path):
    """--no-fsync changes no data: a resume with the other setting is the same run."""
    plugin, sums = reference
    for name, killed, resumed, step in [
        ("a", ["--no-fsync"], [], "tasks-done"),
        ("b", [], ["--no-fsync"], "staged"),
    ]:
        out = tmp_path / name
        assert write(plugin, out, "--scale", "2", *killed, kill_at=step).returncode == -9
        result = write(plugin, out, "--scale", "2", "--resume", *resumed)
        assert result.returncode == 0, result.stderr
        assert checksums(str(out)) == sums[2] and verify(str(out)) == []


# Every setting given explicitly, not only the defaults (issue 31: --row-group-size given made
# every --resume after a commit step, and on a finished run, refuse the run's own output).
EXPLICIT = [
    *("--compression", "zstd", "--row-group-size", "7", "--shuffle", "--seed", "5"),
    *("--format", "parquet", "--retries", "1", "--task-timeout", "60", "--retries-on-error"),
    *("--max-rejects", "100", "--executor", "process"),
]


@pytest.mark.parametrize(
    ("step", "overwrite"),
    [
        *[(step, False) for step in ("staged", "cleaned", "published")],
        *[(step, True) for step in ("marked", "exchanged")],
    ],
)
def test_resume_after_each_commit_step_with_every_setting_given(
    tmp_path, reference, step, overwrite
):
    plugin, _ = reference
    out = tmp_path / "out"
    flags = [*EXPLICIT, "--scale", "2"] + (["--overwrite"] if overwrite else [])
    if overwrite:
        assert write(plugin, out, *EXPLICIT).returncode == 0
    assert write(plugin, out, *flags, kill_at=step).returncode == -9
    resumed = write(plugin, out, *flags, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert verify(str(out)) == [] and leftovers(Store.at(str(out))) == []
    manifest = manifest_file.read(out)
    assert (
        manifest["settings"]["row_group_size"] == 7 and manifest["plugin"]["options"]["scale"] == 2
    )
    again = write(plugin, out, *flags, "--resume")
    assert again.returncode == 0 and "already written" in again.stdout + again.stderr, again.stderr
    other = write(plugin, out, *flags, "--resume", "--row-group-size", "8")
    assert other.returncode == 1 and "--row-group-size: 7 then, 8 now" in other.stderr


def test_resume_of_a_finished_run_with_every_setting_given(tmp_path, reference):
    plugin, _ = reference
    out = tmp_path / "out"
    assert write(plugin, out, *EXPLICIT).returncode == 0
    again = write(plugin, out, *EXPLICIT, "--resume")
    assert again.returncode == 0, again.stderr


def test_resume_of_a_dataset_written_before_the_manifest_held_its_run(tmp_path, reference):
    """Such a manifest records the row group size written, not the one given: a size given now
    matches the one written, no size given matches any, another one is refused."""
    from tests.conftest import edit_manifest

    plugin, _ = reference
    out = tmp_path / "out"
    assert write(plugin, out, "--row-group-size", "7").returncode == 0
    edit_manifest(out, lambda manifest: manifest.pop("run"))
    for given in (["--row-group-size", "7"], []):
        again = write(plugin, out, *given, "--resume")
        assert again.returncode == 0 and "already written" in again.stdout, again.stderr
    other = write(plugin, out, "--row-group-size", "8", "--resume")
    assert other.returncode == 1 and "--row-group-size: 7 then, 8 now" in other.stderr


def test_an_s3_run_killed_after_it_published_is_finished_not_sent_around(s3, reference):
    """Issue 31: killed after the manifest was written but before the staging folder was
    removed, a plain run said "pass --resume" and --resume said "pass --overwrite as well"."""
    plugin, sums = reference
    for then in (["--resume"], []):
        uri = s3(f"commit/fresh-published-{len(then)}")
        assert write(plugin, uri, "--scale", "2", kill_at="published").returncode == -9
        assert published_state(uri, sums) == "new"
        result = write(plugin, uri, "--scale", "2", *then)
        if then:  # finished: what was left is removed
            assert result.returncode == 0 and "already written" in result.stdout, result.stderr
        else:  # the output is complete: no run sends the user to --resume
            assert result.returncode == 1 and "--resume" not in result.stderr, result.stderr
            assert "already exists; pass --overwrite" in result.stderr
            again = write(plugin, uri, "--scale", "2", "--resume")
            assert again.returncode == 0 and "already written" in again.stdout, again.stderr
        assert leftovers(Store.at(uri)) == [] and checksums(uri) == sums[2]


def test_the_advice_after_an_interrupted_append_never_replaces_the_history(reference, tmp_path):
    """An --append killed mid-way, then --resume without --append: the message says the run
    was an append and what keeps the history; adding --overwrite instead is refused with the
    flags as given, and nothing it suggests is --overwrite."""
    plugin, sums = reference
    out = str(tmp_path / "out")
    older_dataset(plugin, out)
    assert write(plugin, out, "--scale", "2", "--append", kill_at="tasks-done").returncode == -9
    staging = tmp_path / ".out.recordmill-partial"
    resumed = write(plugin, out, "--scale", "2", "--resume")
    assert resumed.returncode == 1
    assert (
        "the interrupted run was an --append to it: add --append to finish it, or delete "
        f"{staging} to drop it"
    ) in resumed.stderr
    over = write(plugin, out, "--scale", "2", "--resume", "--overwrite")
    assert over.returncode == 1 and "--append: given then, not given now" in over.stderr
    assert f"delete {staging} to drop it" in over.stderr and "None" not in over.stderr
    again = write(plugin, out, "--scale", "2")  # neither: told to resume or delete
    assert again.returncode == 1 and f"or delete {staging} to start over" in again.stderr
    for result in (resumed, over, again):
        assert "pass --overwrite" not in result.stderr and "add --overwrite" not in result.stderr
    assert checksums(out) == sums[1]  # the history untouched
    assert write(plugin, out, "--scale", "2", "--append", "--resume").returncode == 0
    assert checksums(out)[:3] == sums[1] and len(checksums(out)) == 6


def test_the_advice_when_the_interrupted_run_recorded_nothing(reference, tmp_path):
    plugin, _ = reference
    out = str(tmp_path / "out")
    older_dataset(plugin, out)
    (tmp_path / ".out.recordmill-partial").mkdir()  # killed before it recorded itself
    resumed = write(plugin, out, "--scale", "2", "--resume")
    assert resumed.returncode == 1 and "left nothing to finish" in resumed.stderr
    assert "--overwrite" not in resumed.stderr


def test_an_output_that_is_a_file_is_refused_and_kept(tmp_path):
    plugin = make_plugin(
        tmp_path / "p", "def task_number(): return 1\ndef dict_data(task_id): yield {'a': 1}\n"
    )
    target = tmp_path / "notes.txt"
    target.write_text("a user's notes")
    for flags in ({}, {"overwrite": True}):
        with pytest.raises(
            recordmill.OutputError, match=f"output {target} exists and is not a folder"
        ):
            recordmill.write(plugin, target, progress=False, **flags)
        assert target.read_text() == "a user's notes"
