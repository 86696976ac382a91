"""Strict YAML for files other people wrote: manifests, rule files, skill front matter.

On top of `yaml.SafeLoader`: anchors, aliases and merge keys (`<<`) are
refused, because alias expansion has no bound (nested aliases grow
exponentially: the "billion laughs") and a merge key is a second way to set
a key; a duplicate key is refused at any depth (a parser keeps the last one
silently); nesting deeper than `textdata.MAX_DEPTH` is refused while
composing, before anything recursive can run out of stack. Errors are
`textdata.StructureError`s with the line and key path, never a value.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..textdata import MAX_DEPTH, KeyPath, LineIndex, StructureError

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases and counts nesting while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise StructureError("YAML anchors and aliases are not accepted", line=event.start_mark.line + 1)
        nests = isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent))
        if nests:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise StructureError(f"nested more than {MAX_DEPTH} levels deep", line=event.start_mark.line + 1)
        try:
            return super().compose_node(parent, index)
        finally:
            if nests:
                self._depth -= 1


def _scalar_key(loader: _StrictLoader, node: yaml.Node, path: KeyPath) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise StructureError("a mapping key must be a plain value", line=node.start_mark.line + 1, path=path)
    if node.tag == _MERGE_TAG:
        raise StructureError("YAML merge keys (<<) are not accepted", line=node.start_mark.line + 1, path=path)
    # The key as the constructed mapping will hold it: `1`, `1.0` and `true` collide there, so here too.
    return loader.construct_object(node)


def _check_yaml(loader: _StrictLoader, node: yaml.Node, path: KeyPath, lines: LineIndex) -> None:
    """Duplicate keys refused and the line of every key path recorded, in document order.

    Recursive: the composer has already refused anything nested more than MAX_DEPTH deep.
    """
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = _scalar_key(loader, key_node, path)
            line = key_node.start_mark.line + 1
            sub = path + (key_node.value,)
            if key in seen:
                raise StructureError(f"duplicate key (first at line {seen[key]})", line=line, path=sub)
            seen[key] = line
            lines[sub] = line  # a key's own line wins over where its (block) value starts
            _check_yaml(loader, value_node, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_yaml(loader, item, path + (i,), lines)


def load_yaml(text: str) -> tuple[Any, LineIndex]:
    """(data, line of each key path); raises StructureError, or yaml.YAMLError for a syntax error."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        lines: LineIndex = {}
        _check_yaml(loader, node, (), lines)
        return loader.construct_document(node), lines
    finally:
        loader.dispose()
