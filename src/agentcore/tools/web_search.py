"""`web_search`: a query in, `{results: [{title, url, snippet}]}` out (SRCH).

Provider seam
-------------
Providers are host configuration, listed in the manifest::

    web_search:
      providers:
        - {name: main, url: "https://search.example.com/api/search"}

Every provider speaks our generic JSON protocol:

    GET <url>?q=<query>&limit=<n>            (parameters merged into any query the url has)
    200, Content-Type: application/json
    {"results": [{"title": str, "url": "http(s)://...", "snippet": str}, ...]}

`snippet` may be missing (read as ""); items of any other shape, and URLs
that are not http(s), are dropped; the list is cut to `max_results`
(default 10). Any other status or body is a `provider_error`.

Capability: enabling the tool adds every provider's `host:port` to the
effective `net.hosts` (`requirements`), so a manifest need not repeat it.
Each call still goes through the capability check and the rules with the
chosen provider as a `net.fetch` subject, and the fetch itself through
`agentcore.net.fetch` (same address vetting as `web_fetch`, redirects
confined to the provider's own host).

Provider choice is stable per session: sha256 of the session's working
directory (unique per session, and the only session identity a tool sees
before it runs) modulo the number of providers. A flaky provider therefore
fails consistently within a session instead of alternating.

Budgets: at most `limits.web_search_calls` calls per session (default 25),
counted on the session and on every ancestor session so subagents cannot
multiply the budget; each call is bounded by `limits.web_search_timeout_s`
(default 15 s).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import anyio

from ..access import Access, NetAccess
from ..errors import CompileError, ToolFailure
from ..manifest.spec import ManifestSpec, NetSpec, RequiresSpec
from . import _schemas
from .base import CallContext, Tool, ToolResult

if TYPE_CHECKING:
    from ..manifest.compiled import CompiledManifest

DEFAULT_MAX_RESULTS = 5
MAX_QUERY_CHARS = 2000
_MAX_TITLE = 500
_MAX_SNIPPET = 2000
_MAX_URL = 4096
_ACCESS_ARG = "provider"


@dataclass(frozen=True)
class Provider:
    """A search provider from `web_search.providers`, with the `host:port` enabling the tool adds to `net.hosts`."""

    name: str
    url: str
    authority: str  # canonical host:port, as it appears in net.hosts


def provider_authority(url: str) -> str:
    """Canonical `host:port` of a provider URL; raises HostRefused when it cannot be parsed."""
    from ..net.hosts import parse_url

    _, target = parse_url(url)
    return target.authority


def providers_of(spec: ManifestSpec) -> list[Provider]:
    """The configured providers in manifest order; a malformed URL is a compile error."""
    from ..net.hosts import HostRefused

    out: list[Provider] = []
    for i, p in enumerate(spec.web_search.providers):
        try:
            out.append(Provider(p.name, p.url, provider_authority(p.url)))
        except HostRefused as exc:
            raise CompileError(
                f"web_search provider {p.name!r}: the url is not a usable http(s) URL ({exc.code})",
                location=f"web_search.providers[{i}].url",
            ) from None
    return out


def choose_provider(providers: Sequence[Provider], session_key: str) -> Provider | None:
    """Deterministic per session: sha256(session_key) mod len(providers)."""
    if not providers:
        return None
    digest = hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).digest()
    return providers[int.from_bytes(digest, "big") % len(providers)]


def search_url(provider_url: str, query: str, limit: int) -> str:
    import httpx

    return str(httpx.URL(provider_url).copy_merge_params({"q": query, "limit": str(limit)}))


def parse_results(text: str, limit: int) -> list[dict[str, str]]:
    """Validate a provider's JSON body; raises ToolFailure on a wrong overall shape."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise ToolFailure("provider_error", "the search provider did not return JSON") from None
    items = body.get("results") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ToolFailure("provider_error", "the search provider's response has no results list")
    out: list[dict[str, str]] = []
    for item in items:
        if len(out) >= limit:
            break
        if not isinstance(item, dict):
            continue
        title, url, snippet = item.get("title"), item.get("url"), item.get("snippet", "")
        if not isinstance(title, str) or not isinstance(url, str) or not isinstance(snippet, str):
            continue
        if not url.lower().startswith(("http://", "https://")) or len(url) > _MAX_URL:
            continue
        out.append({"title": title[:_MAX_TITLE], "url": url, "snippet": snippet[:_MAX_SNIPPET]})
    return out


def _session_chain(session: Any) -> list[Any]:
    chain = []
    while session is not None:
        chain.append(session)
        session = session.parent
    return chain


class WebSearchTool(Tool):
    id = "web_search"
    description = (
        "Search the web. Returns up to `max_results` (default 10) results, each with title, url and snippet. "
        "Use web_fetch to read a result."
    )
    parameters = _schemas.WEB_SEARCH
    kind = "fetch"
    concurrency_safe = True
    uses = ("net.fetch",)

    def requirements(self, manifest: ManifestSpec) -> RequiresSpec:
        # The union rule: enabling the tool extends net.hosts by the providers' hosts.
        hosts = list(dict.fromkeys(p.authority for p in providers_of(manifest)))
        return RequiresSpec(net=NetSpec(hosts=hosts))

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        manifest: CompiledManifest | None = getattr(ctx, "manifest", None)
        if manifest is None:
            raise ToolFailure("internal_error", "the engine did not provide the manifest to web_search")
        provider = choose_provider(providers_of(manifest.spec), ctx.session_dir)
        return [] if provider is None else [NetAccess(_ACCESS_ARG, provider.url)]

    def title(self, args: dict[str, Any]) -> str:
        return "Web search"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        limits = runtime.limits
        query: str = args["query"]
        if len(query) > MAX_QUERY_CHARS:
            raise ToolFailure("invalid_arguments", f"the query is longer than {MAX_QUERY_CHARS} characters")
        max_results = int(args.get("max_results", DEFAULT_MAX_RESULTS))
        provider = choose_provider(providers_of(runtime.manifest.spec), str(runtime.session.workdir))
        if provider is None:
            raise ToolFailure("no_provider", "no web search provider is configured for this agent")
        if _ACCESS_ARG not in runtime.resolved:  # the provider host was never proven: fail closed
            raise ToolFailure("no_provider", "the search provider's host was not checked")

        chain = _session_chain(runtime.session)
        if any(s.stores.web_search_calls >= limits.web_search_calls for s in chain):
            raise ToolFailure(
                "quota_exceeded", f"the web search budget of {limits.web_search_calls} calls per session is used up"
            )
        for s in chain:  # counted before the request: a failed call still costs
            s.stores.web_search_calls += 1

        text = await _query(provider, search_url(provider.url, query, max_results), limits.web_search_timeout_s, limits)
        results = parse_results(text, max_results)
        return ToolResult(data={"results": results}, extra={"provider": provider.name})


async def _query(provider: Provider, url: str, timeout_s: float, limits: Any) -> str:
    from ..net.fetch import FetchPolicy, FetchRefused, fetch_url
    from ..net.hosts import compile_host_pattern

    # Redirects may only stay on the provider's own host:port.
    policy = FetchPolicy(
        host_patterns=(compile_host_pattern(provider.authority),),
        timeout_s=timeout_s,
        max_download_bytes=limits.web_fetch_max_download,
    )
    try:
        with anyio.fail_after(timeout_s):
            result = await fetch_url(url, policy)
    except TimeoutError:
        raise ToolFailure("timeout", f"the search provider did not answer within {timeout_s:g} s") from None
    except FetchRefused as exc:
        if exc.code == "timeout":
            raise ToolFailure("timeout", f"the search provider did not answer within {timeout_s:g} s") from None
        raise ToolFailure(exc.code, f"the search request failed: {exc.message}") from None
    if result.status != 200:
        raise ToolFailure("provider_error", f"the search provider answered HTTP {result.status}")
    return result.text
