"""redline's test-suite model: the upstream YAML format (version 0.4) plus `redline:` extensions.

    load_test(path) -> TestSpec            one file (raises SpecError when unusable)
    resolve_suites(items) -> [TestSpec]    files, directories, built-in suite names
    select(tests, name_regex, ...)         filters
    parse_client_arguments(argv) -> Workload   memtier_benchmark arguments, typed
"""
from .discovery import (Discovery, PriorityRange, builtin_suites, builtin_suites_dir, discover, looks_like_test,
                        parse_priority_range, resolve_suites, select)
from .errors import Diagnostic, SpecError
from .loader import EXTENSION_KEYS, SUPPORTED_VERSION, load_test
from .memtier import ArgumentProblem, Workload, parse_client_arguments, split_command
from .model import DbConfig, TestSpec, ToolInvocation

__all__ = [
    "ArgumentProblem", "DbConfig", "Diagnostic", "Discovery", "EXTENSION_KEYS",
    "PriorityRange", "SUPPORTED_VERSION", "SpecError", "TestSpec", "ToolInvocation", "Workload",
    "builtin_suites", "builtin_suites_dir", "discover", "load_test", "looks_like_test",
    "parse_client_arguments", "parse_priority_range", "resolve_suites", "select",
    "split_command",
]
