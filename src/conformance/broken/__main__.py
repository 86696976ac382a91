"""`python -m conformance.broken NAME`: serve one broken implementation over stdio."""

from __future__ import annotations

import os
import sys

import anyio

from ..protocol import serve_stdio
from . import BROKEN, broken_harness
from .faults import FAULTS


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in {**BROKEN, **FAULTS}:
        sys.stderr.write("usage: python -m conformance.broken NAME\nknown: " + ", ".join(sorted({**BROKEN, **FAULTS})) + "\n")
        return 2
    os.environ["CONFORMANCE_HARNESS_STDIO"] = "1"
    anyio.run(serve_stdio, broken_harness(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
