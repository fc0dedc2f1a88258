"""The command line, run as real processes: writer.py, recordmill write/plugins/new, the wrappers."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import recordmill
from tests.conftest import (
    COUNTING_PLUGIN,
    ENDS_WITHIN,
    REPO,
    make_plugin,
    read_dataset,
    recordmill_here,
    run_writer,
    wait_for_staged_tasks,
    write_here,
)


def recordmill_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "recordmill", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_template_flow_from_a_copy(tmp_path):
    result = recordmill_cli("new", "xyz", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plugin = tmp_path / "xyz" / "plugin.py"
    plugin.write_text(plugin.read_text().replace('"label": row_id % 10', '"label": row_id % 3'))
    result = run_writer(
        "--script",
        "xyz",
        "--output",
        "out/xyz",
        "--partitions",
        "4",
        "--workers",
        "2",
        "--tasks",
        "5",
        "--rows-per-task",
        "7",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 35 rows in 4 partitions" in result.stdout
    table = read_dataset(tmp_path / "out" / "xyz")
    assert table["id"].to_pylist() == list(range(35))
    assert table["label"].to_pylist() == [i % 3 for i in range(35)]
    manifest = recordmill.read_manifest(tmp_path / "out" / "xyz")
    assert manifest["plugin"]["options"] == {"tasks": 5, "rows_per_task": 7}
    assert "tasks" in result.stderr  # the progress bar


def test_new_refuses_an_existing_folder(tmp_path):
    (tmp_path / "xyz").mkdir()
    result = recordmill_cli("new", "xyz", cwd=tmp_path)
    assert result.returncode == 1 and "already exists" in result.stderr


@pytest.mark.parametrize("package", [[], ["--package"]])
def test_new_refuses_a_link_to_nothing_in_one_line(tmp_path, package):
    """A name planted as a link to nothing is never written through (it was a traceback)."""
    (tmp_path / "xyz").symlink_to(tmp_path / "elsewhere")
    result = recordmill_cli("new", *package, "xyz", cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "xyz already exists (a symbolic link)" in result.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_help_shows_the_plugin_options(tmp_path):
    result = run_writer("--script", str(REPO / "templates" / "template"), "--help")
    assert result.returncode == 0
    assert "options of plugin 'template'" in result.stdout
    assert "--rows-per-task" in result.stdout
    general = run_writer("--help")
    assert "--partitions" in general.stdout and "--rows-per-task" not in general.stdout
    # --no-fsync says what it costs, and no "(default: True)" that would read as its own.
    text = general.stdout.split("\n  --no-fsync", 1)[1].split("\n  --retries", 1)[0]
    flag = " ".join(text.split())
    assert flag.startswith("trade safety for speed") and "scratch outputs" in flag
    assert "default" not in flag


def test_seed_flag_names_keep_working(counting_plugin, tmp_path):
    result = run_writer(
        "--mindrecord_script",
        counting_plugin,
        "--mindrecord_file",
        tmp_path / "out",
        "--mindrecord_partitions",
        "3",
        "--mindrecord_workers",
        "2",
        "--sizes",
        "4,4",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "out").glob("part-*-of-00003.parquet"))) == 3
    assert result.stderr == ""  # --quiet: no progress bar


def test_every_flag_from_yaml_and_the_command_line_wins(counting_plugin, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            script: {counting_plugin}
            output: {tmp_path / "from_yaml"}
            partitions: 2
            workers: 2
            format: arrow
            shuffle: true
            seed: 3
            quiet: true
            sizes: "1,2,3"
            """
        )
    )
    result = run_writer("--config", config)
    assert result.returncode == 0, result.stderr
    manifest = recordmill.read_manifest(tmp_path / "from_yaml")
    assert manifest["format"] == "arrow" and manifest["settings"]["seed"] == 3
    assert manifest["total_rows"] == 6 and len(manifest["partitions"]) == 2

    result = run_writer(
        "--config", config, "--output", tmp_path / "from_line", "--partitions", "3", "--sizes", "5"
    )
    assert result.returncode == 0, result.stderr
    manifest = recordmill.read_manifest(tmp_path / "from_line")
    assert len(manifest["partitions"]) == 3 and manifest["total_rows"] == 5
    assert manifest["format"] == "arrow"  # still from the file


def test_yaml_with_an_unknown_key_is_an_error(counting_plugin, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"script: {counting_plugin}\noutput: {tmp_path / 'o'}\npartitons: 4\n")
    result = run_writer("--config", config)
    assert result.returncode == 1
    assert "unknown setting 'partitons' (did you mean partitions?)" in result.stderr


def test_a_config_with_several_unknown_keys_names_them_all(counting_plugin, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"script: {counting_plugin}\noutput: {tmp_path / 'o'}\npartitons: 4\nwrokers: 2\n"
    )
    result = run_writer("--config", config)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert (
        "unknown settings 'partitons' (did you mean partitions?), 'wrokers' (did you " in lines[0]
    )


def test_yaml_is_data_not_code(counting_plugin, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"script: {counting_plugin}\noutput: !!python/object/apply:os.system ['echo pwned']\n"
    )
    result = run_writer("--config", config)
    assert result.returncode == 1
    assert "pwned" not in result.stdout and "cannot read --config" in result.stderr


def test_recordmill_write_is_the_same_as_writer_py(counting_plugin, tmp_path):
    result = recordmill_cli(
        "write",
        "--script",
        counting_plugin,
        "--output",
        tmp_path / "out",
        "--workers",
        "1",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    same = run_writer("--script", counting_plugin, "--output", tmp_path / "w", "--quiet")
    assert same.returncode == 0, same.stderr
    ours, theirs = read_dataset(tmp_path / "out"), read_dataset(tmp_path / "w")
    assert ours.num_rows == 25 and ours.equals(theirs)
    assert ours["name"].to_pylist() == [
        f"t{t}-{i}" for t, n in enumerate((5, 0, 17, 3)) for i in range(n)
    ]


def test_plugins_lists_where_each_comes_from(tmp_path):
    make_plugin(tmp_path / "mine", COUNTING_PLUGIN)
    result = recordmill_cli("plugins", cwd=tmp_path)
    assert result.returncode == 0
    listed = result.stdout.splitlines()
    lines = {line.split()[0]: line.split()[1] for line in listed if not line.startswith(" ")}
    assert lines["mine"] == "path" and lines["imagenet"] == "builtin"
    # Under each, what it reads: its docstring's first line.
    below = dict(itertools.pairwise(listed))
    recordio = next(x for x in listed if x.startswith("recordio "))
    assert (
        below[recordio].strip()
        == "MXNet RecordIO files (.rec, as im2rec writes them), without MXNet."
    )


def test_a_plugin_error_exits_non_zero_with_task_and_traceback(tmp_path):
    plugin = make_plugin(
        tmp_path / "raising",
        """
        def task_number():
            return 3

        def dict_data(task_id):
            if task_id == 1:
                raise RuntimeError("cannot open shard")
            yield {"x": 1}
        """,
    )
    for workers in ("1", "2"):
        result = run_writer("--script", plugin, "--output", tmp_path / "out", "--workers", workers)
        assert result.returncode == 1
        assert "task 1 failed: dict_data() raised RuntimeError: cannot open shard" in result.stderr
        assert 'raise RuntimeError("cannot open shard")' in result.stderr  # the plugin's traceback
        assert not (tmp_path / "out").exists()


def test_a_bad_row_message_names_task_row_field(tmp_path):
    plugin = make_plugin(
        tmp_path / "bad",
        """
        def task_number():
            return 2

        def schema():
            return {"label": {"type": "int32"}}

        def dict_data(task_id):
            for i in range(5):
                yield {"label": "x" if (task_id, i) == (1, 3) else i}
        """,
    )
    result = run_writer("--script", plugin, "--output", tmp_path / "out", "--quiet")
    assert result.returncode == 1
    assert "task 1, row 3, field 'label': wrong type; expected int32, got str 'x'" in result.stderr
    assert "Traceback" not in result.stderr


# Task 0 is done at once; the others wait for a file that never comes, so the run is still
# running when it is killed, however slow the machine (no sleep that a busy one outlasts).
GATED_PLUGIN = """
    import os
    import time

    def task_number():
        return 40

    def dict_data(task_id):
        deadline = time.monotonic() + 120
        while task_id and not os.path.exists(__file__ + ".go") and time.monotonic() < deadline:
            time.sleep(0.01)
        yield {"task": task_id}
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_run_leaves_nothing_that_looks_complete(tmp_path, sig):
    plugin = make_plugin(tmp_path / "slow", GATED_PLUGIN)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "writer.py"),
            "--script",
            plugin,
            "--output",
            out,
            "--workers",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    wait_for_staged_tasks(out, 1, process)
    os.kill(process.pid, sig)
    process.wait(timeout=ENDS_WITHIN)
    assert process.returncode != 0
    assert not out.exists()
    assert not list(tmp_path.rglob("_manifest.*"))
    assert not list(tmp_path.rglob("part-*"))
    if sig == signal.SIGINT:
        assert process.returncode == 130
    else:
        os.killpg(process.pid, signal.SIGKILL)  # the workers, orphaned by the kill


def test_an_error_in_a_main_process_hook_shows_the_plugin_traceback(tmp_path):
    plugin = make_plugin(
        tmp_path / "counting_fails",
        """
        def task_number():
            return len(open("/nonexistent/list.txt").readlines())

        def dict_data(task_id):
            yield {"x": 1}
        """,
    )
    result = run_writer("--script", plugin, "--output", tmp_path / "out")
    assert result.returncode == 1
    assert "plugin counting_fails: task_number() raised FileNotFoundError" in result.stderr
    assert 'open("/nonexistent/list.txt")' in result.stderr
    # the plugin's frames only: not pluggy's hook calls nor recordmill's
    frames = [line for line in result.stderr.splitlines() if line.startswith('  File "')]
    assert len(frames) == 1 and "counting_fails" in frames[0], result.stderr


def _bad_invocations(tmp_path, plugin):
    """(what, argv, config text or None, a phrase the one error line must hold)."""
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "notours").mkdir()
    (tmp_path / "notours" / "keep.txt").write_text("a user's file")
    head = f"script: {plugin}\noutput: {tmp_path / 'o'}\n"
    return [
        ("output below a file", ["--output", tmp_path / "afile" / "sub"], None, "is a file"),
        ("a folder of other files", ["--output", tmp_path / "notours"], None, "choose another"),
        ("the same, --overwrite", ["--output", tmp_path / "notours", "--overwrite"], None, "never"),
        ("a list for one value", [], head + "rows-per-task: [1, 2]\n", "takes one value"),
        ("a word for a number", [], head + "partitions: three\n", "partitions: expected int"),
        ("a YAML syntax error", [], head + "partitions: [3\n", "cannot read --config"),
        ("a python tag", [], head + "seed: !!python/object/apply:os.getpid []\n", "constructor"),
        ("a key twice", [], head + "rows_per_task: 3\nrows-per-task: 4\n", "same setting"),
        ("a choice not there", [], head + "format: csv\n", "one of parquet, arrow"),
        (
            "an unknown plugin",
            ["--script", "no-such-plugin", "--output", tmp_path / "x"],
            None,
            "no plugin",
        ),
    ]


def test_each_bad_invocation_is_one_clear_line(tmp_path):
    plugin = REPO / "templates" / "template"
    for n, (what, argv, config, phrase) in enumerate(_bad_invocations(tmp_path, plugin)):
        args = [str(a) for a in argv]
        if config is not None:
            (tmp_path / "run.yaml").write_text(config)
            args += ["--config", str(tmp_path / "run.yaml")]
        elif "--script" not in args:
            args = ["--script", str(plugin), *args]
        run = run_writer if n == 0 else write_here  # the first in a process, the rest here
        result = run(*args, "--quiet")
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1, what
        assert len(lines) == 1 and lines[0].startswith("recordmill: error: "), (what, lines)
        assert phrase in lines[0], (what, lines[0])
    assert (tmp_path / "notours" / "keep.txt").read_text() == "a user's file"


def test_os_errors_get_advice_only_where_it_fits():
    import errno

    from recordmill.errors import os_error_text

    full = os_error_text("out/x", OSError(errno.ENOSPC, "No space left on device"))
    assert full == "cannot write out/x: No space left on device (is the disk full?)"
    assert "read-only" in os_error_text("o", OSError(errno.EROFS, "Read-only file system"))
    assert "disk full" not in os_error_text("o", OSError(errno.EIO, "Input/output error"))
    assert "disk full" not in os_error_text("o", OSError("NO_SUCH_KEY from S3"))


def test_the_last_progress_line_counts_every_row(tmp_path):
    result = run_writer(
        *("--script", REPO / "templates" / "template", "--output", tmp_path / "x"),
        *("--workers", "2", "--tasks", "8", "--rows-per-task", "5000"),
    )
    assert result.returncode == 0, result.stderr
    tasks_bar = [line for line in result.stderr.replace("\r", "\n").splitlines() if "8/8" in line]
    assert tasks_bar and "40,000 rows" in tasks_bar[-1], tasks_bar[-1:]


def test_each_subcommand_misused_is_one_clear_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "empty").mkdir()
    cases = [
        ["bogus"],
        ["plugins", "--bogus"],
        ["new", tmp_path / "afile"],
        ["demo-data"],
        ["make-list"],
        *[
            [command, path]
            for command in ("info", "head", "rejects")
            for path in ("nosuch", "afile")
        ],
        ["verify", tmp_path / "empty"],
        ["head", tmp_path / "empty", "-n", "x"],
        ["write", "--script", "no-such-plugin", "--output", tmp_path / "o"],
        ["write", "--partitions", "three"],
        # Every built-in plugin given an input that is not there.
        *[
            ["write", "--script", name, flag, tmp_path / "nosuch", "--output", tmp_path / "o"]
            for name, flag in (
                ("imagenet", "--image-dir"),
                ("filelist", "--list"),
                ("mnist", "--data-dir"),
                *((n, "--input") for n in ("csv", "tfrecord", "mindrecord", "recordio")),
                *((n, "--input") for n in ("ofrecord", "torchrecord")),
            )
        ],
    ]
    for n, argv in enumerate(cases):
        argv = [str(tmp_path / a) if a in ("nosuch", "afile") else str(a) for a in argv]
        if n == 0:
            result = subprocess.run(
                [sys.executable, "-m", "recordmill", *argv], capture_output=True, text=True
            )
        else:
            result = recordmill_here(*argv)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0, argv
        assert "Traceback" not in result.stderr, (argv, result.stderr)
        if argv[0] == "verify":  # its report goes to stdout, one line per problem
            assert result.stdout.strip().endswith(
                "not a recordmill dataset: it has no _manifest.parquet or _manifest.arrow"
            ), argv
            continue
        assert len(lines) == 1 and lines[0].startswith("recordmill: error: "), (argv, lines)


def test_quiet_means_no_warnings_either(tmp_path):
    plugin = make_plugin(
        tmp_path / "warns",
        """
        import os
        import warnings

        def task_number():
            return 2

        def dict_data(task_id):
            warnings.warn("a library's warning about task %d" % task_id)
            os.write(2, b"a C library's own print about task %d\\n" % task_id)  # as libtiff does
            yield {"a": task_id}
        """,
    )
    quiet = run_writer("--script", plugin, "--output", tmp_path / "q", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    loud = run_writer("--script", plugin, "--output", tmp_path / "l")
    assert loud.returncode == 0 and "a library's warning about task" in loud.stderr
    assert "a C library's own print about task 1" in loud.stderr


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path):
    """``recordmill head PATH -n 400 | head -1``: no BrokenPipeError traceback."""
    out = tmp_path / "out"
    written = run_writer(
        *("--script", REPO / "templates" / "template", "--output", out, "--partitions", "1")
    )
    assert written.returncode == 0, written.stderr
    assert " rows in 1 partition (" in written.stdout  # not "1 partitions"
    piped = subprocess.run(
        f"{sys.executable} -m recordmill head {out} -n 400 | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.stdout.startswith("[0] ") and piped.stdout.count("\n") == 1
    assert piped.stderr == "", piped.stderr


def test_a_mistyped_flag_gets_the_flag_it_is_closest_to(counting_plugin, tmp_path):
    result = run_writer(
        "--script", counting_plugin, "--output", tmp_path / "o", "--partitons", "4", "--quiet"
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "unrecognized arguments: --partitons 4 (did you mean --partitions?)" in lines[0]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--over"], "--over (did you mean --overwrite?)"),
        (["--app", "--part", "2"], "--app --part 2 (did you mean --append?) (did you mean"),
        (["--siz", "1,2"], "--siz 1,2 (did you mean --sizes?)"),  # a plugin flag
    ],
)
def test_an_abbreviated_flag_is_never_taken_for_the_flag(counting_plugin, tmp_path, flags, said):
    """``--over`` once replaced a dataset as --overwrite: no prefix of a flag is taken for it."""
    out = tmp_path / "o"
    assert run_writer("--script", counting_plugin, "--output", out, "--quiet").returncode == 0
    before = recordmill.read_manifest(out)
    result = run_writer("--script", counting_plugin, "--output", out, *flags, "--quiet")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"unrecognized arguments: {said}" in lines[0]
    assert recordmill.read_manifest(out) == before  # nothing replaced, nothing appended


def test_a_mistyped_command_gets_the_command_it_is_closest_to():
    result = recordmill_cli("wirte", "--script", "x")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "invalid choice: 'wirte'" in lines[0] and "(did you mean write?)" in lines[0]


def test_a_misspelt_plugin_flag_is_named_not_a_missing_required_one(tmp_path):
    result = run_writer(
        *("--script", "imagenet", "--image-dri", tmp_path, "--output", tmp_path / "o")
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "unrecognized arguments: --image-dri (did you mean --image-dir?)" in lines[0]
    assert "required" not in lines[0]


DEBUGGED_PLUGIN = """
    import os

    def task_number():
        return 2

    def dict_data(task_id):
        pid = os.getpid()
        breakpoint()
        yield {"task": task_id, "pid": pid}
"""


def test_workers_0_runs_the_tasks_here_where_breakpoint_works(tmp_path):
    plugin = make_plugin(tmp_path / "debugged", DEBUGGED_PLUGIN)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [
            *(sys.executable, str(REPO / "writer.py"), "--script", str(plugin)),
            *("--output", str(out), "--workers", "0", "--quiet"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # pdb reads this process's standard input: the commands typed at each stop.
    stdout, stderr = process.communicate("p task_id + 100\nc\np task_id + 100\nc\n", timeout=120)
    assert process.returncode == 0, stderr
    assert "(Pdb) 100" in stdout and "(Pdb) 101" in stdout
    assert read_dataset(out)["pid"].to_pylist() == [process.pid] * 2  # no worker process


def test_the_help_says_what_workers_0_and_1_do():
    text = " ".join(run_writer("--help").stdout.split())
    assert "0 runs the tasks in this process" in text
    assert "1 runs in this process" not in text


def test_quiet_keeps_the_plugins_own_logging_and_stderr(tmp_path):
    plugin = make_plugin(
        tmp_path / "logs",
        """
        import logging
        import os
        import sys
        import warnings

        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
        log = logging.getLogger("logs")

        def task_number():
            return 2

        def dict_data(task_id):
            log.info("reading shard %d", task_id)
            print("plugin's own print about task %d" % task_id, file=sys.stderr)
            warnings.warn("a library's warning about task %d" % task_id)
            os.write(2, b"a C library's own print about task %d\\n" % task_id)
            yield {"a": task_id}
        """,
    )
    for workers in ("0", "2"):
        out = tmp_path / f"q{workers}"
        quiet = run_writer("--script", plugin, "--output", out, "--workers", workers, "--quiet")
        assert quiet.returncode == 0, quiet.stderr
        assert "logs: reading shard 0" in quiet.stderr and "logs: reading shard 1" in quiet.stderr
        assert "plugin's own print about task 1" in quiet.stderr
        assert "warning" not in quiet.stderr and "C library" not in quiet.stderr


def test_the_progress_bar_in_a_log_is_one_line_at_the_end(tmp_path):
    """Standard error not a terminal (a log file): no frame every 0.1 s, the last one only."""
    result = run_writer(
        *("--script", REPO / "templates" / "template", "--output", tmp_path / "x"),
        *("--workers", "2", "--tasks", "6", "--rows-per-task", "20000"),
    )
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr
    lines = result.stderr.splitlines()
    assert [line.split(":")[0] for line in lines] == ["template", "partitions"], lines
    assert "6/6" in lines[0] and "120,000 rows" in lines[0]


def test_head_misused_on_a_real_dataset_is_one_clear_line(counting_plugin, tmp_path):
    out = tmp_path / "o"
    recordmill.write(counting_plugin, out, progress=False, workers=0)
    for argv, said in [
        (["-n", "0"], "argument -n: expected a whole number from 1, got '0'"),
        (["-n", "-1"], "argument -n: expected a whole number from 1, got '-1'"),
        (["--columns", "task,nope"], "no column 'nope'; columns: task, i, name"),
    ]:
        result = recordmill_cli("head", out, *argv)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and result.stdout == "", argv
        assert len(lines) == 1 and lines[0].startswith("recordmill: error: "), (argv, lines)
        assert said in lines[0], lines[0]


def test_warnings_are_one_recordmill_line_on_the_command_line(counting_plugin, tmp_path):
    result = run_writer("--script", counting_plugin, "--output", tmp_path / "o", "--resume")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "warning" in line.lower()]
    assert lines == [
        f"recordmill: warning: nothing to resume at {tmp_path / 'o'} (no interrupted run): "
        "writing it from the start"
    ]
