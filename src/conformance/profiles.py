"""Profiles: every check is tagged `rfc` (it restates the Grida RFC) or `spec` (our stricter choice).

`profiles.yaml` says which requirements restate a binding statement of the
RFC and which SPEC section-24 choice each other requirement comes from. A
case's checks take the tag of the case (computed from the requirements it
cites, or set by its `profile:` key); a check that reads an envelope
extension (`metadata.tool`, `kind`, `error_code`, `refusal`, ...) or the
exact key set of a tool's `data` is `spec` whatever the case, because the
RFC has neither. `conformance run --profile rfc` scores only `rfc` checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there

PROFILES_FILE = Path(__file__).parent / "profiles.yaml"
PROFILES: tuple[str, ...] = ("rfc", "spec")
# Envelope metadata keys that are SPEC extensions (ENVL-2 second half, ENVL-4, ENVL-5, ENVL-7).
EXTENSION_KEYS = frozenset({"tool", "kind", "error_code", "refusal", "network", "redirects", "provider", "withheld", "protected_removed", "output_capped"})
# The feature a harness declares when its envelopes carry those extensions.
EXTENSIONS_FEATURE = "envelope.extensions"


@dataclass(frozen=True)
class Tag:
    """The profile a check counts under: `rfc`, or `spec` with the section-24 choice it comes from."""

    profile: str              # rfc | spec
    choice: str | None = None  # the section-24 choice of a spec check
    needs: str | None = None   # a feature without which the check is not evaluated

    def label(self) -> str:
        return "rfc" if self.profile == "rfc" else f"spec: {self.choice or 'detail'}"


RFC = Tag("rfc")
EXTENSION = Tag("spec", "envelope-extensions", EXTENSIONS_FEATURE)
SHAPES = Tag("spec", "fixed-shapes")


@dataclass(frozen=True)
class ProfileMap:
    """`profiles.yaml` loaded: which requirements restate the RFC, and which choice each other one comes from."""

    rfc: dict[str, str]                  # requirement -> the RFC statement it restates
    choice_of: dict[str, str]            # requirement -> choice key (spec requirements named in a choice)
    titles: dict[str, str]               # choice key -> section-24 bullet title

    def tag_of(self, requirement: str) -> Tag:
        if requirement in self.rfc:
            return RFC
        return Tag("spec", self.choice_of.get(requirement, "detail"))

    def case_tag(self, requirements: Iterable[str]) -> Tag:
        """rfc when any cited requirement restates the RFC, else the first cited requirement's choice."""
        tags = [self.tag_of(r) for r in requirements]
        if any(t.profile == "rfc" for t in tags):
            return RFC
        return tags[0] if tags else Tag("spec", "detail")

    def problems(self, known: Iterable[str]) -> list[str]:
        ids = set(known)
        out = [f"profiles.yaml: unknown requirement {r}" for r in sorted((set(self.rfc) | set(self.choice_of)) - ids)]
        out += [f"profiles.yaml: {r} is both rfc and spec ({self.choice_of[r]})" for r in sorted(set(self.rfc) & set(self.choice_of))]
        return out


def _load(path: Path) -> ProfileMap:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
    rfc = {str(k): str(v) for k, v in (data.get("rfc") or {}).items()}
    choice_of: dict[str, str] = {}
    titles: dict[str, str] = {}
    for key, spec in (data.get("choices") or {}).items():
        titles[str(key)] = str(spec.get("title", key))
        for rid in spec.get("requirements") or []:
            if rid in choice_of:
                raise ValueError(f"profiles.yaml: {rid} is listed under {choice_of[rid]} and {key}")
            choice_of[str(rid)] = str(key)
    if "detail" not in titles:
        raise ValueError("profiles.yaml: the choice `detail` must exist")
    return ProfileMap(rfc, choice_of, titles)


@lru_cache(maxsize=4)
def load_profiles(path: Path | None = None) -> ProfileMap:
    return _load(path or PROFILES_FILE)


def explicit_tag(spec: Mapping[str, Any], default: Tag) -> Tag:
    """A case, step or check may set `profile:` (and `choice:` for spec) itself."""
    profile = spec.get("profile")
    if profile is None:
        return default
    if profile == "rfc":
        return Tag("rfc", None, default.needs)
    return Tag("spec", spec.get("choice") or default.choice or "detail", default.needs)


def pointer_tag(pointer: str, predicates: Mapping[str, Any], base: Tag) -> Tag:
    """The tag of one pointer check: envelope extensions and exact data key sets are always spec."""
    parts = pointer.split("/")
    if len(parts) >= 3 and parts[1] == "metadata" and parts[2] in EXTENSION_KEYS:
        return EXTENSION
    if pointer == "/data" and "keys" in predicates:
        return SHAPES
    return base
