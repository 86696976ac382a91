"""Parameter schemas of the locked tools (LOCK). Names are part of the contract."""

from __future__ import annotations

from typing import Any


def obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


PATH = {"type": "string", "minLength": 1, "description": "Absolute path, or relative to the workspace root."}

READ = obj(
    {
        "path": PATH,
        "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return (default 2000)."},
        "byte_offset": {"type": "integer", "minimum": 0},
        "byte_length": {"type": "integer", "minimum": 1},
    },
    ["path"],
)
WRITE = obj({"path": PATH, "content": {"type": "string"}}, ["path", "content"])
EDIT = obj(
    {
        "path": PATH,
        "old_string": {"type": "string", "minLength": 1},
        "new_string": {"type": "string"},
        "replace_all": {"type": "boolean", "default": False},
    },
    ["path", "old_string", "new_string"],
)
GLOB = obj(
    {"pattern": {"type": "string", "minLength": 1}, "path": PATH},
    ["pattern"],
)
GREP = obj(
    {
        "pattern": {"type": "string", "minLength": 1, "description": "Rust regex syntax (ripgrep)."},
        "path": PATH,
        "glob": {"type": "string", "minLength": 1},
        "case_insensitive": {"type": "boolean", "default": False},
    },
    ["pattern"],
)
BASH = obj(
    {
        "command": {"type": "string", "minLength": 1},
        "timeout_ms": {"type": "integer", "minimum": 1},
        "description": {"type": "string"},
    },
    ["command"],
)
TODO = obj(
    {
        "todos": {
            "type": "array",
            "items": obj(
                {
                    "content": {"type": "string", "minLength": 1},
                    "status": {"enum": ["pending", "in_progress", "completed"]},
                },
                ["content", "status"],
            ),
        }
    },
    ["todos"],
)
TASK = obj(
    {
        "description": {"type": "string", "minLength": 1},
        "prompt": {"type": "string", "minLength": 1},
        "agent": {"type": "string", "minLength": 1},
    },
    ["description", "prompt"],
)
QUESTION = obj(
    {
        "questions": {
            "type": "array",
            "minItems": 1,
            "items": obj(
                {
                    "question": {"type": "string", "minLength": 1},
                    "header": {"type": "string"},
                    "options": {
                        "type": "array",
                        "items": obj({"label": {"type": "string", "minLength": 1}, "description": {"type": "string"}}, ["label"]),
                    },
                    "multi_select": {"type": "boolean"},
                },
                ["question"],
            ),
        }
    },
    ["questions"],
)
WEB_SEARCH = obj(
    {"query": {"type": "string", "minLength": 1}, "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}},
    ["query"],
)
WEB_FETCH = obj({"url": {"type": "string", "minLength": 1}}, ["url"])
SKILL = obj({"name": {"type": "string", "minLength": 1}}, ["name"])
TOOL_SEARCH = obj(
    {"query": {"type": "string", "minLength": 1}, "max_results": {"type": "integer", "minimum": 1, "maximum": 50}},
    ["query"],
)
