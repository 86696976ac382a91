"""Manifests: loading, validation, compilation into an immutable object, and subagent intersection."""

from .catalog import ToolCatalog, ToolDeclaration
from .compiled import CompiledManifest, EffectiveCapabilities, compile_manifest, load_manifest, load_project_rules
from .loader import read_manifest_spec, read_rules_spec
from .spec import ManifestSpec, RequiresSpec, RuleSpec

__all__ = [
    "CompiledManifest",
    "EffectiveCapabilities",
    "ManifestSpec",
    "RequiresSpec",
    "RuleSpec",
    "ToolCatalog",
    "ToolDeclaration",
    "compile_manifest",
    "load_manifest",
    "load_project_rules",
    "read_manifest_spec",
    "read_rules_spec",
]
