"""SPEC.md requirement ids: the real document, and the parser's strictness."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from conformance.spec_ids import (
    AREAS,
    LEVELS,
    SpecFormatError,
    SpecNotFoundError,
    default_spec_path,
    load_requirements,
    parse_requirements,
)

SPEC = default_spec_path()


@pytest.fixture(scope="module")
def reqs():
    return load_requirements()


# -- the real SPEC.md ------------------------------------------------------


def test_spec_found_at_repo_root() -> None:
    assert SPEC.name == "SPEC.md" and SPEC.is_file()
    assert (SPEC.parent / "pyproject.toml").is_file()


def test_count_in_expected_range(reqs) -> None:
    assert 120 <= len(reqs) <= 300


def test_ids_match_keys_and_are_unique(reqs) -> None:
    assert all(k == r.id == f"{r.area}-{r.number}" for k, r in reqs.items())
    # The parser refuses duplicates; check independently on the raw text too.
    raw = re.findall(r"^(?:[-*+]\s+)?\*\*\[([A-Z]+-\d+)\]\*\*", SPEC.read_text(encoding="utf-8"), re.M)
    assert len(raw) == len(set(raw)) == len(reqs)


def test_levels_valid(reqs) -> None:
    assert {r.level for r in reqs.values()} <= set(LEVELS)
    assert any(r.level == "MUST" for r in reqs.values())


def test_areas_known_and_all_used(reqs) -> None:
    used = {r.area for r in reqs.values()}
    assert used <= set(AREAS)
    assert used == set(AREAS), f"areas without requirements: {set(AREAS) - used}"


def test_numbering_per_area(reqs) -> None:
    by_area: dict[str, list[int]] = defaultdict(list)
    for r in reqs.values():  # document order
        by_area[r.area].append(r.number)
    for area, nums in by_area.items():
        assert len(nums) == len(set(nums)), f"{area} has duplicate numbers"
        assert min(nums) == 1, f"{area} does not start at 1"
        assert nums == sorted(nums), f"{area} ids are out of order in the document"


def test_texts_are_sentences(reqs) -> None:
    for r in reqs.values():
        assert len(r.text) >= 20, r.id
        assert "**[" not in r.text, r.id


def test_cross_references_resolve(reqs) -> None:
    text = SPEC.read_text(encoding="utf-8")
    areas = "|".join(AREAS)
    cited = set(re.findall(rf"\b((?:{areas})-\d+)\b", text))
    missing = sorted(cited - set(reqs))
    assert not missing, f"SPEC.md cites ids that do not exist: {missing}"


def test_fixed_headless_texts_match_engine(reqs) -> None:
    broker = pytest.importorskip("agentcore.asking")
    assert f"`{broker.HEADLESS_ASK_TEXT}`" in reqs["ASK-10"].text
    assert f"`{broker.HEADLESS_QUESTION_TEXT}`" in reqs["QSTN-3"].text


# -- the parser --------------------------------------------------------------


def test_parses_bullets_paragraphs_and_continuations() -> None:
    text = (
        "# T\n\n"
        "- **[TOOL-1]** MUST — first line\n"
        "  continued here.\n"
        "\n"
        "**[TOOL-2]** MAY — a paragraph form.\n"
        "- **[PERM-3]** SHOULD — third.\n"
        "not a continuation\n"
    )
    got = parse_requirements(text)
    assert list(got) == ["TOOL-1", "TOOL-2", "PERM-3"]
    assert got["TOOL-1"].text == "first line continued here."
    assert got["TOOL-1"].line == 3
    assert got["TOOL-2"].level == "MAY"
    assert got["PERM-3"].text == "third."


def test_adjacent_bullets_do_not_merge() -> None:
    got = parse_requirements("- **[REQ-1]** MUST — one.\n- **[REQ-2]** MUST — two.\n")
    assert got["REQ-1"].text == "one." and got["REQ-2"].text == "two."


@pytest.mark.parametrize(
    "line, message",
    [
        ("- **[TOOL-1]** MUST — a.\n- **[TOOL-1]** MUST — b.\n", "duplicate"),
        ("- **[FOO-1]** MUST — unknown area.\n", "unknown area"),
        ("- **[TOOL-1]** MUSTNT — bad level.\n", "unknown level"),
        ("- **[TOOL-1]** MUST: no dash.\n", "LEVEL — text"),
        ("- **[TOOL-01]** MUST — leading zero.\n", "malformed"),
        ("- **[TOOL-0]** MUST — zero.\n", "malformed"),
        ("- **[tool-1]** MUST — lowercase.\n", "malformed"),
        ("Some text **[TOOL-1]** MUST — hidden mid-line.\n", "not at the start"),
        ("```\nunclosed\n", "unterminated"),
    ],
)
def test_rejects_malformed(line: str, message: str) -> None:
    with pytest.raises(SpecFormatError, match=message):
        parse_requirements(line)


def test_markers_in_code_are_examples() -> None:
    text = (
        "Write them as `- **[PERM-7]** MUST — ...` please.\n"
        "```\n- **[PERM-8]** MUST — inside a fence.\n```\n"
        "- **[PERM-1]** MUST — the only real one.\n"
    )
    assert list(parse_requirements(text)) == ["PERM-1"]


def test_explicit_path(tmp_path: Path) -> None:
    p = tmp_path / "spec.md"
    p.write_text("- **[TODO-1]** MUST — keep a list.\n", encoding="utf-8")
    assert load_requirements(p)["TODO-1"].text == "keep a list."


def test_missing_explicit_path(tmp_path: Path) -> None:
    with pytest.raises(SpecNotFoundError):
        load_requirements(tmp_path / "nope.md")


def test_missing_default_path_explains(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import conformance.spec_ids as mod

    monkeypatch.setattr(mod, "default_spec_path", lambda: tmp_path / "SPEC.md")
    with pytest.raises(SpecNotFoundError, match="pass load_requirements"):
        mod.load_requirements()
