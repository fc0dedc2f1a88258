"""The docs stay true: every relative link resolves (anchors included), the README stays a front
door (at most 12 KB, its two set-up commands work), the blocks of the docs marked for testing run
against the installed package, and ARCHITECTURE.md names only modules and functions that exist.

A fenced block right after a ``<!-- test -->`` line runs (bash blocks with bash, Python blocks with
this Python), in order, in one empty folder per page; after ``<!-- test: write PATH -->`` the block
is written to PATH in that folder instead. ``python`` and ``recordmill`` in bash blocks are this
Python and this Python's recordmill.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from recordmill import compat

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "recordmill"
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINKED = [README, ARCHITECTURE, *DOCS, ROOT / "benchmarks" / "README.md"]
README_LIMIT = 12 * 1024
# .ci/run takes the README's test command with this pattern (grep -m1 -E) and runs it.
CI_TEST_COMMAND = re.compile(r'^pip install -e "\.\[test\]" && ')

FENCE = re.compile(r"^(```+|~~~+)([^\n]*)\n(.*?)^\1[ \t]*$", re.S | re.M)
MARKED = re.compile(r"^<!-- test(?:: write (\S+))? -->\n(```+)(\w*)\n(.*?)^\2[ \t]*$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
# The pages whose marked blocks run. The README's are the getting-started page's (checked below),
# so they run there.
TESTED = [p for p in DOCS if MARKED.search(p.read_text())]


def expanded(path: Path) -> str:
    """A page's text with the files it includes (``--8<-- "FILE"``, from the repository root)."""
    return SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(), path.read_text())


def prose(text: str) -> str:
    """Text without its fenced blocks and code spans, where nothing is a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs makes it (Python-Markdown's toc); GitHub's is the same for
    headings without runs of spaces or hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").replace("*", "")  # code spans and emphasis: their text
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", expanded(path))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(prose(expanded(path)))]


# --- links ------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    found = links(page)
    wrong = []
    for target in found:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        name, _, anchor = target.partition("#")
        file = (page.parent / name).resolve() if name else page
        if not file.exists():
            wrong.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            wrong.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not wrong, f"{page.relative_to(ROOT)}:\n" + "\n".join(wrong)


def test_the_link_checker_sees_links_and_anchors():
    assert "docs/getting-started.md" in links(README)
    assert "one-global-order" in anchors(ROOT / "docs" / "output-format.md")
    assert "reading-bench_readpy" in anchors(ROOT / "docs" / "benchmarks.md")  # included
    assert slug("Row counts (`task_rows`)") == "row-counts-task_rows"


# --- the README --------------------------------------------------------------------------------


def test_the_readme_is_a_front_door():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; at most {README_LIMIT:,}"


def set_up_commands() -> list[str]:
    text = README.read_text()
    start = re.search(r"^## Set up\s*$", text, re.M)
    assert start, "README.md has no '## Set up' section"
    block = FENCE.search(text, start.end())
    assert block, "no code block after '## Set up'"
    return block.group(3).splitlines()


def test_the_readme_has_exactly_two_set_up_commands_and_ci_runs_the_second():
    first, second = set_up_commands()
    assert first.startswith("pip install -e . && ")
    assert second == 'pip install -e ".[test]" && python -m pytest -q -n auto'
    ci_picks = [line for line in README.read_text().splitlines() if CI_TEST_COMMAND.match(line)]
    assert ci_picks[:1] == [second], "grep -m1 in .ci/run would take another line"


def test_the_first_set_up_command_writes_its_output(tmp_path):
    first, _ = set_up_commands()
    write = shlex.split(first.split(" && ", 1)[1])  # the install itself is not run here
    assert write[:2] == ["python", "writer.py"]
    shutil.copy(ROOT / "writer.py", tmp_path)
    shutil.copytree(ROOT / "templates", tmp_path / "templates")
    done = subprocess.run(
        [sys.executable, *write[1:], "--quiet"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    output = tmp_path / write[write.index("--output") + 1]
    assert (output / "_manifest.parquet").is_file()
    assert len(list(output.glob("part-*.parquet"))) == int(write[write.index("--partitions") + 1])


# --- the marked blocks -------------------------------------------------------------------------


def _commands(folder: Path) -> Path:
    """A folder of ``python`` and ``recordmill`` commands that run this Python."""
    folder.mkdir()
    for name, run in (("python", ""), ("recordmill", " -m recordmill")):
        script = folder / name
        script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)}{run} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.mark.parametrize("page", TESTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_marked_blocks_run(page, tmp_path):
    blocks = MARKED.findall(page.read_text())
    assert blocks, f"{page.name}: no block marked <!-- test -->"
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "PATH": f"{_commands(tmp_path / 'bin')}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HOME": str(tmp_path / "huggingface"),  # Hugging Face datasets' cache
        "HF_HUB_OFFLINE": "1",
    }
    outputs = []
    for write_to, _, language, code in blocks:
        if write_to:
            (work / write_to).parent.mkdir(parents=True, exist_ok=True)
            (work / write_to).write_text(code)
            continue
        if language == "bash":
            command = ["bash", "-e", "-o", "pipefail", "-c", code]
            outputs += re.findall(r"--output\s+(\S+)", code)
        else:
            assert language == "python", f"{page.name}: a block marked for testing in {language!r}"
            command = [sys.executable, "-c", code]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{page.name}, the block:\n{code}\n{done.stdout}{done.stderr}"
    for output in outputs:
        assert (work / output / "_manifest.parquet").is_file(), f"{page.name}: no {output}"


def test_the_getting_started_page_writes_and_reads():
    marked = MARKED.findall(GETTING_STARTED.read_text())
    code = "\n".join(block[3] for block in marked)
    assert "recordmill write" in code and "recordmill.open(" in code


def test_the_readme_s_examples_are_the_getting_started_page_s():
    """Each block of the README marked for testing is one of the getting-started page's, in the
    same order, so that running that page runs the README's too."""
    readme = MARKED.findall(README.read_text())
    page = iter(MARKED.findall(GETTING_STARTED.read_text()))
    assert readme, "README.md: no block marked <!-- test -->"
    missing = [block[3] for block in readme if block not in page]  # consumes page: in order
    assert not missing, "README blocks not in docs/getting-started.md (in order):\n" + "\n".join(
        missing
    )


# --- ARCHITECTURE.md ---------------------------------------------------------------------------


def _defined() -> tuple[set[str], dict[str, set[str]]]:
    """Every function and class name defined in recordmill, and each class's members."""
    names: set[str] = set()
    members: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            if isinstance(node, ast.ClassDef):
                members.setdefault(node.name, set()).update(
                    n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
                )
    return names, members


def _path_exists(span: str) -> bool:
    pattern = span.replace("NAME", "*")
    places = [ROOT, PACKAGE, *(p for p in PACKAGE.iterdir() if p.is_dir())]
    return any(list(place.glob(pattern)) for place in places)


def _module_exists(dotted: str) -> bool:
    """``recordmill.x.y`` (an old name kept by compat, a module, or a name defined in one)."""
    dotted = compat.new_name(dotted) or dotted
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:n])
        module = next(
            (f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None
        )
        if module is None:
            continue
        rest = parts[n:]
        if not rest:
            return True
        if module == PACKAGE / "__init__.py":
            import recordmill

            return rest[0] in recordmill.__all__
        tree = ast.parse(module.read_text())
        top = {
            getattr(node, "name", None) or getattr(getattr(node, "targets", [None])[0], "id", None)
            for node in tree.body
        }
        top |= {
            a.asname or a.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for a in node.names
        }
        return rest[0] in top
    return False


def _problem(span: str, names: set[str], members: dict[str, set[str]]) -> str | None:
    """What is wrong with a code span of ARCHITECTURE.md that names a file, a folder, a module,
    a function or a class (``plan.py``, ``engine/``, ``recordmill.torch``, ``plan()``,
    ``OutputDir``, ``OutputDir.commit()``); None when it exists or names none of these."""
    if re.fullmatch(r"[\w./*-]+(\.py|/)", span) and not span.startswith(("_", ".")):
        return None if _path_exists(span) else f"no file or folder {span}"
    if re.fullmatch(r"recordmill(\.\w+)+(\(\))?", span):
        return None if _module_exists(span.removesuffix("()")) else f"no module or name {span}"
    if m := re.fullmatch(r"(_?[A-Z]\w*)\.(\w+)(\(\))?", span):
        found = m.group(2) in members.get(m.group(1), set())
        return None if found else f"no {m.group(2)} in a class {m.group(1)}"
    if m := re.fullmatch(r"(\w+)\(\)|(_?[A-Z][a-z]\w*)", span):
        found = (m.group(1) or m.group(2)) in names
        return None if found else f"no function or class {span}"
    return None


def test_architecture_names_only_what_exists():
    spans = set(re.findall(r"`([^`\n]+)`", ARCHITECTURE.read_text()))
    names, members = _defined()
    wrong = [p for p in (_problem(s, names, members) for s in sorted(spans)) if p]
    assert not wrong, "ARCHITECTURE.md:\n" + "\n".join(wrong)


def test_architecture_names_every_module():
    text = ARCHITECTURE.read_text()
    named = set(re.findall(r"`(?:[\w/]+/)?(\w+\.py)`", text))
    missing = sorted(
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py", "plugin.py") and p.name not in named
    )
    assert not missing, f"modules ARCHITECTURE.md does not name: {missing}"


def test_the_docs_count_the_built_in_plugins_there_are():
    """A count of the built-in plugins in words ("the ten built-in plugins") is the number of
    folders of plugins/: a plugin added makes such a sentence stale."""
    words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
    number = {w: n for n, w in enumerate(words.split(), start=1)}
    plugins = [p for p in (ROOT / "plugins").iterdir() if (p / "plugin.py").is_file()]
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    said = [
        (page.name, m.group(1))
        for page in pages
        for m in re.finditer(r"\b(\w+) built-in plugins", page.read_text(), re.I)
        if m.group(1).lower() in number
    ]
    wrong = [(name, w) for name, w in said if number[w.lower()] != len(plugins)]
    assert said and not wrong, f"{len(plugins)} built-in plugins; the docs say {wrong or said}"
