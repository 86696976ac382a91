"""Stock levels for a tiny shop."""

STOCK = {"apples": 12, "pears": 0}


def reserve(item: str, count: int) -> bool:
    # TODO: refuse negative counts
    if STOCK.get(item, 0) < count:
        return False
    STOCK[item] -= count
    return True


def restock(item: str, count: int) -> None:
    # TODO: log every restock
    STOCK[item] = STOCK.get(item, 0) + count
