"""Refusals of the command line, the page (``recordmill show``) and the public modules that no
other test reaches: each one line, said before anything is written."""

from __future__ import annotations

import re

import pytest

import recordmill
from recordmill.cli import main
from recordmill.errors import ConfigError, OutputError
from tests.conftest import make_plugin

PLUGIN = """
    def task_number():
        return 2

    def schema():
        return {"id": "int64", "label": "float32", "name": "string"}

    def dict_data(task_id):
        for i in range(3):
            yield {"id": task_id * 3 + i, "label": 0.5 * i, "name": f"n{i}"}
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    recordmill.write(make_plugin(root / "p", PLUGIN), root / "ds", workers=0, progress=False)
    return root / "ds"


def one_line(capsys, *argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1, err
    return err


def test_a_public_name_that_does_not_exist_is_an_attribute_error():
    import recordmill.kit

    with pytest.raises(AttributeError, match=r"^module 'recordmill' has no attribute 'opne'"):
        recordmill.opne  # noqa: B018
    with pytest.raises(AttributeError, match=r"^module 'recordmill.kit' has no attribute 'nope'"):
        recordmill.kit.nope  # noqa: B018


def test_a_package_name_that_is_no_plugin_name_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(capsys, "new", "--package", "1st-plugin")
    assert line.endswith(
        "--package '1st-plugin': a plugin name is letters, digits, - and _, starting with a letter"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_plugin_option_that_clashes_with_recordmill_s_is_refused(tmp_path, capsys):
    source = """
        def add_options(parser):
            parser.add_argument("--partitions", type=int)

        def task_number(options):
            return 1

        def dict_data(task_id, options):
            yield {"x": 1}
    """
    plugin = make_plugin(tmp_path / "clash", source)
    assert main(["write", "--script", str(plugin), "--output", str(tmp_path / "out")]) == 1
    # The line, then the traceback of the plugin's own code (where the clash is)
    line, *traceback = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "recordmill: error: plugin clash: its option clashes with recordmill's: argument "
        "--partitions: conflicting option string: --partitions"
    )
    assert 'parser.add_argument("--partitions", type=int)' in "\n".join(traceback)
    assert not (tmp_path / "out").exists()


def test_a_decoder_that_cannot_be_imported_is_one_line(dataset, capsys):
    line = one_line(capsys, "verify", dataset, "--decode", "name=nowhere_at_all:thing")
    assert line.startswith("recordmill: error: --decode nowhere_at_all:thing: cannot import it (")


def test_the_page_refuses_rows_below_zero_and_labels_it_cannot_chart(dataset, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="recordmill show needs the show extra (matplotlib)")
    page = tmp_path / "page.html"
    with pytest.raises(SystemExit):
        main(["show", str(dataset), "-o", str(page), "--rows", "-1"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line
        == "recordmill: error: argument --rows: must be 0 or more, got -1 (see: recordmill show --help)"
    )
    with pytest.raises(ConfigError, match=r"^rows must be 0 or more, got -2$"):
        recordmill.show(dataset, page, rows=-2)
    with pytest.raises(ConfigError) as caught:
        recordmill.show(dataset, page, label="nope")
    assert str(caught.value) == "--label nope: no such column; columns: id, label, name"
    with pytest.raises(ConfigError) as caught:
        recordmill.show(dataset, page, label="label")
    assert str(caught.value) == (
        "--label label: a label column holds integers or strings, not float"
    )
    assert not page.exists()
    with pytest.raises(OutputError) as caught:
        recordmill.show(dataset, tmp_path / "no" / "such" / "folder" / "page.html")
    assert str(caught.value).startswith(
        f"cannot write the page to {tmp_path / 'no' / 'such' / 'folder' / 'page.html'}: "
    )


def test_a_location_no_filesystem_takes_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"^cannot use the location nosuch://x/y: "):
        recordmill.open("nosuch://x/y")


def test_the_page_of_a_dataset_with_a_damaged_partition_is_one_line(dataset, tmp_path):
    pytest.importorskip("matplotlib", reason="recordmill show needs the show extra (matplotlib)")
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    name = recordmill.read_manifest(copy)["partitions"][0]["file"]
    data = bytearray((copy / name).read_bytes())
    data[4:40] = bytes(36)  # the first page's header: no reader takes it
    (copy / name).write_bytes(bytes(data))
    with pytest.raises(OutputError) as caught:
        recordmill.show(copy, tmp_path / "page.html")
    said = str(caught.value)
    assert "\n" not in said  # pyarrow's message held one: the page's error was two lines
    assert re.fullmatch(
        rf"{re.escape(str(copy))}/{name} cannot be read: .* \(recordmill verify tells more\)", said
    ), said
    assert not (tmp_path / "page.html").exists()
