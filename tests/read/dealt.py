"""What each rank should be given of an epoch's order, written out plainly (not with
recordmill.read.dealing) for the loaders' tests to compare with."""

from __future__ import annotations


def dealt(order: list, rank: int, world: int, size: int) -> list[list]:
    """Rank ``rank``'s batches of ``order`` with ``even="pad"``: whole rounds of ``world`` batches
    dealt in turn, then the rest padded with the order's first items to a whole number a rank and
    shared out, a piece a rank."""
    whole = len(order) - len(order) % (world * size)
    batches = [order[i : i + size] for i in range(0, whole, size)][rank::world]
    rest = list(order[whole:])
    rest += list(order[: -len(rest) % world])
    piece = len(rest) // world
    return batches + ([rest[rank * piece : (rank + 1) * piece]] if piece else [])
