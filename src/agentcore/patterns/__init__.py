"""The pattern languages of requirements and rules, each compiled once."""

from .globtext import glob_literal_count, glob_literal_prefix, has_wildcard
from .path import PathPattern, compile_path_pattern
from .shell import ArgPattern, ShellRequirement, compile_shell_requirement

__all__ = [
    "ArgPattern",
    "PathPattern",
    "ShellRequirement",
    "compile_path_pattern",
    "compile_shell_requirement",
    "glob_literal_count",
    "glob_literal_prefix",
    "has_wildcard",
]
