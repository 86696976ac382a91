"""`tool_search`: find extension tools by query and wire them into the session (TSRCH).

The catalogue is every tool the manifest lists under `deferred_tools`, plus
the session's deferred MCP tools (TSRCH-6). Ranking is Okapi BM25 (k1 = 1.2,
b = 0.75) over the tool id and description; ties are broken by id, so the
order is deterministic. Found tools are added to the session's discovered
set, which makes them callable for the rest of the session. A discovered
tool gains no capability: its calls are checked against this agent's
effective set and rules like any other.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Iterable, Sequence

from ..vocabulary import LOCKED_IDS
from . import _schemas
from .base import Tool, ToolResult

DEFAULT_MAX_RESULTS = 10
K1 = 1.2
B = 0.75
_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def bm25_rank(query: str, docs: Sequence[tuple[str, str]], *, k1: float = K1, b: float = B) -> list[tuple[str, float]]:
    """(doc id, score) for every document with a positive score, best first, ties by id."""
    terms = set(tokenize(query))
    if not terms or not docs:
        return []
    counts = [(doc_id, Counter(tokenize(text))) for doc_id, text in docs]
    n = len(counts)
    avgdl = sum(sum(c.values()) for _, c in counts) / n or 1.0
    df = {t: sum(1 for _, c in counts if t in c) for t in terms}
    # The "+1" form keeps idf positive even for a term in every document.
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    scored: list[tuple[str, float]] = []
    for doc_id, c in counts:
        dl = sum(c.values())
        score = 0.0
        for t in terms:
            tf = c.get(t, 0)
            if tf:
                score += idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
        if score > 0:
            scored.append((doc_id, score))
    scored.sort(key=lambda e: (-e[1], e[0]))
    return scored


def catalogue(tools: Iterable[Tool], deferred: Iterable[str]) -> dict[str, Tool]:
    """The searchable tools: those the manifest defers (never locked ones, never tools it did not name)."""
    wanted = set(deferred) - set(LOCKED_IDS)
    return {t.id: t for t in tools if t.id in wanted}


class ToolSearchTool(Tool):
    id = "tool_search"
    description = (
        "Search the catalogue of additional tools (MCP and extension tools) by keywords. "
        "Returns up to `max_results` (default 10) matching tools with their descriptions and parameters; "
        "the tools found become callable for the rest of the session."
    )
    parameters = _schemas.TOOL_SEARCH
    kind = "search"

    def title(self, args: dict[str, Any]) -> str:
        return "Search tools"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        limit = int(args.get("max_results", DEFAULT_MAX_RESULTS))
        found = catalogue(runtime.registry.tools(), runtime.manifest.deferred)
        source = runtime.session.stores.tool_source
        if source is not None:  # the session's deferred MCP tools (TSRCH-6)
            found.update({e.tool.id: e.tool for e in source.entries() if e.deferred and e.tool.id not in found})
        # Tokenising splits ids into words ("repo_clone" -> repo, clone).
        docs = [(tid, f"{tid} {t.description}") for tid, t in found.items()]
        ranked = bm25_rank(args["query"], docs)[:limit]
        results = []
        for tid, score in ranked:
            tool = found[tid]
            runtime.session.stores.discovered_tools.add(tid)
            results.append(
                {
                    "id": tid,
                    "description": tool.description,
                    "kind": tool.kind,
                    "parameters": tool.parameters,
                    "score": round(score, 4),
                }
            )
        return ToolResult(data={"tools": results})
