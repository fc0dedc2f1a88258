"""What every command shares: a parser whose usage mistakes are one line."""

from __future__ import annotations

import argparse
from typing import Any


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake is one ``recordmill: error:`` line that says where the usage is."""

    def error(self, message: str) -> Any:
        self.exit(2, f"recordmill: error: {message} (see: {self.prog} --help)\n")
