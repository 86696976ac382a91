"""`web_fetch`: fetch one http(s) URL and return it as text (NET, TRUNC).

The capability check has already canonicalised the URL and matched its host
against `net.hosts`; the fetch itself goes through `agentcore.net.fetch`,
which re-vets every hop (redirects included) against the same host list and
dials only vetted addresses. HTML comes back as markdown; anything above the
`web_fetch` limit (measured after extraction) goes to a sidecar file.
"""

from __future__ import annotations

from typing import Any

from ..access import Access, NetAccess
from ..errors import ToolFailure
from . import _schemas
from .base import CallContext, Tool, ToolResult


def safe_origin(url: str) -> str:
    """`scheme://host[:port]` of a URL for titles: paths and queries may carry secrets."""
    from ..net.hosts import HostRefused, parse_url

    try:
        _, target = parse_url(url)
    except HostRefused:
        return "a URL"
    return f"{target.scheme}://{target.authority}"


class WebFetchTool(Tool):
    id = "web_fetch"
    description = (
        "Fetch an http(s) URL and return its content as text (HTML is converted to markdown). "
        "Only hosts allowed by the agent's net.hosts are reachable; redirects are followed within them. "
        "Long pages return the head and an output_path to read the rest."
    )
    parameters = _schemas.WEB_FETCH
    kind = "fetch"
    own_truncation = True
    concurrency_safe = True
    uses = ("net.fetch",)

    def accesses(self, args: dict[str, Any], ctx: CallContext) -> list[Access]:
        return [NetAccess("url", args["url"])]

    def title(self, args: dict[str, Any]) -> str:
        return f"Fetch {safe_origin(str(args.get('url', '')))}"

    async def execute(self, args: dict[str, Any], runtime: Any) -> ToolResult:
        # Imported here: httpx and the HTML converter cost ~75 ms, which calls of
        # other tools (and `agentcore call read …`) should not pay.
        from ..net.fetch import FetchPolicy, FetchRefused, fetch_url

        url, _target = runtime.resolved["url"]
        limits = runtime.limits
        session = runtime.session
        tool_id = runtime.tool_id

        def hop_check(target: Any) -> None:
            # A redirect is a new subject: the rules decide again; only `allow` is followed
            # (an `ask` cannot be put to a human mid-transfer, so it refuses).
            from ..rules.evaluator import Subject

            subject = Subject(tool_id, "net.fetch", "host", target.authority, host=target.host, port=target.port)
            if session.rule_evaluator.evaluate(subject).action != "allow":
                raise FetchRefused("redirect_refused", "a redirect led to a host the permission rules do not allow")

        policy = FetchPolicy(
            host_patterns=tuple(runtime.manifest.effective.net_hosts),
            timeout_s=limits.web_fetch_timeout_s,
            max_download_bytes=limits.web_fetch_max_download,
            hop_check=hop_check,
            on_progress=runtime.report if runtime.progress is not None else None,
        )
        try:
            # The canonical URL the capability check approved, not the raw argument.
            result = await fetch_url(str(url), policy)
        except FetchRefused as exc:
            raise ToolFailure(exc.code, exc.message) from None
        data: dict[str, Any] = {
            "url": result.url,
            "status": result.status,
            "content_type": result.content_type,
            "content": result.text,
        }
        encoded = result.text.encode("utf-8", "surrogatepass")
        if len(encoded) <= limits.web_fetch_bytes:
            return ToolResult(data=data, extra={"redirects": len(result.redirects)})
        spool = runtime.byte_spool(limits.web_fetch_bytes)
        try:
            spool.write_all(encoded)  # a cap cuts the sidecar (TRUNC-9)
        finally:
            spool.close()
        data["content"] = spool.head_text()
        return ToolResult(
            data=data,
            truncated=True,
            output_path=str(spool.path),
            extra={"redirects": len(result.redirects)},
        )
