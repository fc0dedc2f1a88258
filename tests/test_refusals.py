"""Every refusal has a test that names it: each ``raise SomeError(message)`` in recordmill/ and
plugins/ has a distinctive literal fragment of its message in some test's strings.

A message is found by its literal parts (an f-string's text between the braces; the strings a
helper is given to build it; a message held in a name, by the strings assigned to that name in
the same function). A test names a site when one of the test's strings (a regular expression's
plain runs, unescaped) is a piece of the site's text that at most a few sites share, so that
``"not found"`` names nothing and ``"holds rows of another schema"`` names its own refusal.
What is not a refusal guarding data is in ``EXEMPT``, each with its reason."""

from __future__ import annotations

import ast
import difflib
import functools
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = [REPO / "recordmill", REPO / "plugins"]
# Built on main by another engineer with its own tests; not this suite's to check here.
SKIP_FILES: tuple[str, ...] = ()
LONG = 20  # a run of characters this long, shared by a test and a message, names it
SHORT = 14  # ... or a whole literal part of the message this long
MAX_SHARED = 2  # ... where no more messages than this have that run


@dataclass(frozen=True)
class Site:
    path: str  # relative to the repository
    line: int
    error: str
    texts: tuple[str, ...]  # the literal parts of the message
    own: int = 0  # how many of them (the first) are written where it is raised
    specific: int = 0  # ... with those of the names it takes them from (a helper's: after)

    def __str__(self) -> str:
        longest = max(self.texts, key=len, default="")
        return f"{self.path}:{self.line} {self.error}({longest!r})"


def _strings(node: ast.AST) -> list[str]:
    """The literal parts of an expression: constants, f-strings' text, nested calls' strings."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.append(sub.value)
    return found


def _words(found: list[str], known: list[str], own: bool = False) -> list[str]:
    """The strings of ``found`` that can be a message's words: four characters or more, not in
    ``known``, and unless written where the message is (``own``) not a lone word (a key or a
    name looked up, "__name__", "rows")."""
    words: list[str] = []
    for text in (t.strip() for t in found):
        if len(text) >= 4 and text not in known + words and (own or not text.isidentifier()):
            words.append(text)
    return words


def _own_text(node: ast.AST) -> list[str]:
    """The literal parts of a message written where it is raised: a string, an f-string's text,
    strings joined with ``+``, the words given to a helper that frames them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _own_text(node.left) + _own_text(node.right)
    if isinstance(node, ast.Call):  # the words given to a helper that frames them
        return [t for arg in node.args for t in _own_text(arg)]
    return []


def _assigned(function: ast.AST, name: str) -> list[str]:
    found = []
    for sub in ast.walk(function):
        targets = []
        if isinstance(sub, ast.Assign):
            targets = sub.targets
        elif isinstance(sub, ast.AnnAssign | ast.AugAssign) and sub.value is not None:
            targets = [sub.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            found += _strings(sub.value)
    return found


def _sites_of(path: Path) -> list[Site]:
    tree = ast.parse(path.read_text(), str(path))
    rel = str(path.relative_to(REPO))
    sites = []
    scopes = [tree] + [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    helpers = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    seen = set()
    for scope in scopes[::-1]:  # innermost function first: a raise belongs to it
        for node in ast.walk(scope):
            if not isinstance(node, ast.Raise) or id(node) in seen:
                continue
            seen.add(id(node))
            call = node.exc
            if not isinstance(call, ast.Call):
                continue  # a re-raise, or an error built elsewhere
            error = ast.unparse(call.func)
            texts, looked_up, framed = [], [], []
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                texts += _own_text(arg)  # the message's own words
                looked_up += [t for t in _strings(arg) if t not in texts]
                for name in ast.walk(arg):
                    if isinstance(name, ast.Name):
                        looked_up += _assigned(scope, name.id)
                    # A message a helper of the module (or a method) frames: what it returns.
                    if isinstance(name, ast.Call) and isinstance(
                        name.func, ast.Name | ast.Attribute
                    ):
                        called = getattr(name.func, "id", None) or name.func.attr
                        helper = helpers.get(called) if called.startswith("_") else None
                        inside = ast.walk(helper) if helper is not None else ()
                        returns = [n for n in inside if isinstance(n, ast.Return)]
                        framed += [t for r in returns if r.value for t in _strings(r.value)]
            texts = _words(texts, [], own=True)
            looked_up = _words(looked_up, texts)
            framed = _words(framed, texts + looked_up)
            parts = (*texts, *looked_up, *framed)
            site = Site(rel, node.lineno, error, parts, len(texts), len(texts) + len(looked_up))
            sites.append(site)
    return sorted(sites, key=lambda s: s.line)


@functools.cache
def raise_sites() -> tuple[Site, ...]:
    sites = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if not str(path.relative_to(REPO)).startswith(SKIP_FILES):
                sites += _sites_of(path)
    return tuple(sites)


_REGEX = re.compile(r"\.[*+?]|\\[dswSDW][*+?]?|\[[^\]]*\][*+?]?|\||\{\d*,?\d*\}")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


GAP = "\x00"  # where a test's string holds a value or a wildcard: no run crosses it


def _test_text(node: ast.AST) -> str | None:
    """A test's string: a constant, or an f-string with a ``GAP`` for each value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else GAP for v in node.values)
    return None


@functools.cache
def test_strings() -> frozenset[str]:
    """Every string in the tests but docstrings and plugins' sources, each as it is and as a
    regular expression's plain text: unescaped, a ``GAP`` for each wildcard."""
    pieces = set()
    for path in (REPO / "tests").rglob("*.py"):
        if path.name == Path(__file__).name:
            continue
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree)
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            text = _test_text(node)
            if text is None or id(node) in skip | inner or "\n" in text.strip():
                continue  # a docstring, an f-string's part, a plugin's source: no assertion
            # As it is (an ``in`` test) and as a regular expression (a ``match=``).
            for piece in (text, re.sub(r"\\(.)", r"\1", _REGEX.sub(GAP, text)).strip(" ^$")):
                if len(piece) >= 8:
                    pieces.add(piece)
    return frozenset(pieces)


test_strings.__test__ = False  # a helper, not a test


def messages(sites: tuple[Site, ...]) -> dict[tuple[str, ...], list[Site]]:
    """The sites by their message's text: one message raised in two places is one message."""
    found: dict[tuple[str, ...], list[Site]] = {}
    for site in sites:
        if site.texts:
            found.setdefault(site.texts, []).append(site)
            OWN[site.texts] = (site.own, site.specific)
    return found


OWN: dict[tuple[str, ...], tuple[int, int]] = {}  # a message's Site.own and Site.specific


def _shingles(text: str, size: int) -> set[str]:
    return {text[i : i + size] for i in range(len(text) - size + 1)}


@functools.cache
def _common(piece: str, part: str) -> str:
    match = difflib.SequenceMatcher(None, piece, part, autojunk=False).find_longest_match()
    return piece[match.a : match.a + match.size]


def _sharing(parts: tuple[str, ...], joined: tuple[str, ...]) -> int:
    """How many messages hold all of ``parts``."""
    if parts not in _SHARING:
        _SHARING[parts] = sum(all(p in text for p in parts) for text in joined)
    return _SHARING[parts]


_SHARING: dict[tuple[str, ...], int] = {}


def _score(
    piece: str, message: tuple[str, ...], joined: tuple[str, ...], runs: bool = True
) -> tuple[bool, float]:
    """Whether the test's string ``piece`` holds every literal part of ``message`` written where
    it is raised, and how much of it it holds: its longest run in common with a part, or the
    whole parts it holds, when that is enough and no more than ``MAX_SHARED`` messages have it
    (else 0). A message of words of its own is told by them and the strings it takes from
    names; what a helper frames it with (shared by many) counts only for a message with next to
    no words of its own."""
    own, specific = OWN.get(message, (len(message), len(message)))
    own = message[:own]
    if all(part in piece for part in own) and sum(map(len, own)) >= 8:
        return True, sum(map(len, own))
    if sum(map(len, own)) >= 8:
        message = message[:specific]
    best = 0
    # (``runs``: whether they share a run of LONG characters at all, which finding it needs)
    found = [_common(piece, part) for part in message if runs and len(part) >= LONG]
    run = max(found, key=len, default="")
    if len(run) >= LONG and _sharing((run,), joined) <= MAX_SHARED:
        best = len(run)
    whole = [part for part in message if len(part) >= 6 and part in piece]
    if sum(map(len, whole)) >= SHORT and _sharing(tuple(whole), joined) <= MAX_SHARED:
        best = max(best, sum(map(len, whole)))
    return False, best


def named(texts: list[tuple[str, ...]], pieces: set[str]) -> dict[tuple[str, ...], str]:
    """Each message a test names, with the test's string that names it: a string names every
    message it holds whole, and the one it holds the most of when that is more (see ``_score``;
    a string that holds part of two messages names neither but the one it holds more of)."""
    index: dict[str, set[int]] = {}  # each part's runs of 6 characters, a shorter part whole
    long: dict[str, set[int]] = {}  # and of LONG characters
    for n, message in enumerate(texts):
        for part in message:
            for shingle in _shingles(part, 6) or {part}:
                index.setdefault(shingle, set()).add(n)
            for shingle in _shingles(part, LONG):
                long.setdefault(shingle, set()).add(n)
    joined = tuple("\n".join(message) for message in texts)
    _SHARING.clear()
    found: dict[tuple[str, ...], str] = {}
    for piece in pieces:
        runs = _shingles(piece, 4) | _shingles(piece, 5) | _shingles(piece, 6)
        near = set().union(*(index.get(s, set()) for s in runs))
        sharing = set().union(*(long.get(s, set()) for s in _shingles(piece, LONG)))
        scored = {n: _score(piece, texts[n], joined, n in sharing) for n in near}
        wholes = [n for n, (whole, _) in scored.items() if whole]
        top = max((score for _, score in scored.values()), default=0)
        for n in wholes:
            found.setdefault(texts[n], piece)
        best = [n for n, (whole, score) in scored.items() if score and score == top]
        if not any(scored[n][0] for n in best):  # a part of one message, more than any whole
            for n in best:
                found.setdefault(texts[n], piece)
    return found


# Messages that guard no data, each with its reason, by file and a literal part of the message.
EXEMPT = {
    ("recordmill/inputs/packed.py", "column"): "adds the column's name to a decoder's own error, "
    "each named by its own test (tests/inputs/test_packed.py, test_mds.py, test_litdata.py)",
    ("recordmill/dataset/sizes.py", "unreachable"): "the end of a loop whose last turn always "
    "returns: an assertion, not a refusal",
    ("recordmill/dataset/schema.py", "has no numpy dtype"): "an internal guard: every caller "
    "gives a number type (a tensor of text is refused before, schema.py's tensor-layout line)",
    ("recordmill/dataset/schema.py", "use a -1 first dimension"): "raised under pyarrow older "
    "than 26 only (apache/arrow#35692); the tests run the newest, where it cannot be reached",
    (
        "recordmill/read/gather.py",
        "more than 2 GB of values in one gather; take fewer rows at once",
    ): "needs more than 2 GB of values in memory at once, more than a unit test may take",
    ("recordmill/read/segments.py", "bytes at offset"): "an internal invariant: pyarrow given the "
    "footer reads only the runs fetched for it",
    ("recordmill/inputs/recordio.py", "RecordIO records hold less than 2**29 bytes"): "the limit "
    "of the writer of demo data and test files, and a 512 MB record to reach it",
    ("recordmill/executors/pool.py", "no job (idle)"): "the pool's report of workers that die "
    "before they are given any job (a broken interpreter): no input or output is involved",
    ("plugins/audio/plugin.py", "not a FLAC file soundfile decodes ("): "raised by soundfile, an "
    "optional package the test environment does not install (its absence is tested instead)",
}

# Messages whose words are too few to be told apart by text (all but "plugin" is a value), each
# with the test that reaches it.
REACHED = {
    ("recordmill/plugin/manager.py", "plugin"): (
        "tests/plugin/test_option_refusals.py",
        "test_a_hook_of_a_wrong_signature_is_named",
    ),
}

# Refusals that guard data and that no test reaches yet (none: issue 42).
UNTESTED = 0


def _exempt(message: tuple[str, ...], sites: list[Site]) -> bool:
    keys = {(site.path, part) for site in sites for part in message}
    return bool(keys & (set(EXEMPT) | set(REACHED)))


def _untested() -> list[str]:
    found = messages(raise_sites())
    names = named(list(found), test_strings())
    return [
        ", ".join(str(site) for site in sites)
        for message, sites in found.items()
        if message not in names and not _exempt(message, sites)
    ]


def test_the_walk_finds_the_refusals_it_should():
    # What the walk sees: a plain message, an f-string's parts, a message held in a name.
    sites = {(s.path, s.line): s for s in raise_sites()}
    texts = {t for s in sites.values() for t in s.texts}
    assert "--partitions must be from 1 to" in texts
    assert "is damaged:" in texts and "the manifest of" in texts
    assert len(sites) > 300
    assert not [s for s in sites.values() if s.path.startswith(SKIP_FILES)]


def test_a_string_names_the_message_it_shares_the_longest_run_with():
    texts = [
        ("--retries must be at least 0, got",),
        ("--max-rejects must be at least 0, got",),
        ("value out of range for",),
        ("is out of range for a dataset of", "rows"),
        ("no file",),
    ]
    found = named(texts, {"--retries must be at least 0, got -1", "value out of range for f16"})
    assert set(found) == {texts[0], texts[2]}
    assert named(texts, {"no file anywhere"}) == {}  # too short to name anything


def test_every_exemption_is_of_a_message_that_exists_and_every_test_named_too():
    sites = raise_sites()
    for path, part in [*EXEMPT, *REACHED]:
        assert any(s.path == path and part in s.texts for s in sites), (path, part)
    for test_file, test in REACHED.values():
        assert f"def {test}(" in (REPO / test_file).read_text(), (test_file, test)


def test_each_refusal_is_named_by_a_test():
    untested = _untested()
    assert not untested, f"{len(untested)} messages no test names:\n" + "\n".join(untested)


def test_the_refusals_no_test_names_are_those_counted():
    # Keeps the count honest both ways: a new refusal without a test, or one tested now.
    assert len(_untested()) == UNTESTED, "\n".join(_untested())
