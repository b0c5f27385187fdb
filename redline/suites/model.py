"""The test-suite model: what one upstream (version 0.4) or redline test file says."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import Diagnostic
from .memtier import Workload


@dataclass
class ToolInvocation:
    tool: str  # e.g. "memtier_benchmark"
    arguments: list[str]  # argv tokens, shell-split like a shell would (quotes!)
    line: int | None  # line of `arguments:` in the file
    workload: Workload | None = None  # parsed arguments when the tool is memtier_benchmark
    timeout_seconds: int | None = None  # preload_tool.timeout

    @property
    def is_memtier(self) -> bool:
        return self.tool == "memtier_benchmark"


@dataclass
class DbConfig:
    configuration_parameters: dict[str, str]  # e.g. {"save": '""'} -> apply as server config
    preload: ToolInvocation | None
    init_commands: list[list[str]]  # each command as argv tokens
    init_lua: str | None
    keyspacelen: int | None  # check.keyspacelen
    dataset_name: str | None
    dataset_url: str | None  # dbconfig.dataset
    dataset_description: str | None = None
    preload_before_replica: bool = False


@dataclass
class TestSpec:
    __test__ = False  # not a pytest test class, despite the name

    name: str
    path: Path
    description: str
    version: str | None
    tested_commands: list[str]
    tested_groups: list[str]
    priority: int | None
    topologies: list[str]
    build_variants: list[str]
    db: DbConfig
    client: ToolInvocation  # the measured client (upstream: the last of `clientconfigs`)
    extensions: dict  # our own top-level `redline:` block, validated
    diagnostics: list[Diagnostic]
    clients: list[ToolInvocation] = field(default_factory=list)  # every client; >1 = multi-client
    dropped: list[Diagnostic] = field(default_factory=list)  # redline-owned settings the suite gave (not used)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    @property
    def has_warnings(self) -> bool:
        return any(d.severity == "warning" for d in self.diagnostics)

    @property
    def multi_client(self) -> bool:
        return len(self.clients) > 1

    @property
    def dataset_scale(self) -> float:
        """redline's `dataset-scale` extension (1.0 when absent)."""
        return float(self.extensions.get("dataset-scale", 1.0))
