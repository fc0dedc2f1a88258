"""What every command shares: a parser whose usage mistakes are one line."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from recordmill.errors import RecordmillWarning, did_you_mean

_UNRECOGNIZED = "unrecognized arguments: "
_REQUIRED = "the following arguments are required: "
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)'")


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake is one ``recordmill: error:`` line that says where the usage is; a
    mistyped flag is named as such, with the flag it is closest to."""

    _given: tuple[str, ...] = ()  # the arguments of the last parse, for error()

    def __init__(self, *args: Any, **kwargs: Any):
        # An abbreviation is never taken for a flag: "--over" would be --overwrite.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = tuple(str(a) for a in (sys.argv[1:] if args is None else args))
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> Any:
        unknown = self.unknown_flags(self._given)
        if message.startswith(_REQUIRED) and unknown:
            # "--image-dri x" leaves --image-dir missing: the typo is what to report.
            message = _UNRECOGNIZED + " ".join(unknown)
        if message.startswith(_UNRECOGNIZED):
            tokens = message[len(_UNRECOGNIZED) :].split()
            message += "".join(self.suggest(t) for t in tokens if t.startswith("--"))
        choice = _INVALID_CHOICE.search(message)
        if choice:  # a mistyped command: "recordmill wirte"
            choices = re.findall(r"'([^']*)'", message[choice.end() :])
            message += did_you_mean(choice.group(1), choices)
        self.exit(2, f"recordmill: error: {message} (see: {self.prog} --help)\n")

    def flags(self) -> list[str]:
        return [flag for action in self._actions for flag in action.option_strings]

    def unknown_flags(self, tokens: Sequence[str]) -> list[str]:
        """The ``--flags`` among ``tokens`` that no option of this parser takes."""
        known = self.flags()
        found = []
        for token in tokens:
            if token == "--":
                break
            flag = token.partition("=")[0]
            if flag.startswith("--") and flag not in known:
                found.append(flag)
        return found

    def suggest(self, token: str) -> str:
        return did_you_mean(token.partition("=")[0], self.flags())


def say_warnings() -> None:
    """recordmill's warnings as one ``recordmill: warning:`` line each on the command line
    (others as Python shows them)."""
    shown = warnings.showwarning

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, RecordmillWarning):
            print(f"recordmill: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, *args, **kwargs)

    if not getattr(shown, "recordmill", False):  # once
        show.recordmill = True  # type: ignore[attr-defined]
        warnings.showwarning = show
