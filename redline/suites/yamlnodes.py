"""YAML read as PyYAML's composed node tree, so that every value keeps its line.

`NodeReader` turns nodes into checked Python values and records a Diagnostic (with the
node's line) for every value of the wrong type instead of raising.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from .errors import Diagnostic, SpecError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose_file(path: Path, text: str) -> tuple[yaml.Node | None, Any]:
    """(root node or None for an empty document, loader able to construct its sub-nodes)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        raise SpecError(path, _mark_line(exc), f"YAML syntax error: {_yaml_message(exc)}") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, None, f"YAML error: {exc}") from None
    return node, loader


def _mark_line(exc: yaml.MarkedYAMLError) -> int | None:
    mark = exc.problem_mark or exc.context_mark
    return mark.line + 1 if mark is not None else None


def _yaml_message(exc: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (exc.context, exc.problem) if p]
    return "; ".join(parts) or str(exc)


def line_of(node: yaml.Node | None) -> int | None:
    return node.start_mark.line + 1 if node is not None else None


def type_name(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    tag = node.tag.rsplit(":", 1)[-1]
    names = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
             "null": "nothing (null)", "timestamp": "a date"}
    return f"{names.get(tag, tag)} ({node.value!r})" if tag != "null" else names["null"]


def suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class NodeReader:
    """Reads nodes of one file; collects diagnostics in `self.diagnostics`."""

    def __init__(self, path: Path, text: str, loader: Any):
        self.path = path
        self.text = text
        self.loader = loader
        self.diagnostics: list[Diagnostic] = []

    # -- findings ---------------------------------------------------------------------------
    def report(self, line: int | None, severity: str, message: str) -> None:
        self.diagnostics.append(Diagnostic(self.path, line, severity, message))

    def fatal(self, line: int | None, message: str) -> SpecError:
        return SpecError(self.path, line, message)

    # -- structure --------------------------------------------------------------------------
    def entries(self, node: yaml.Node, where: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """key -> (key node, value node) of a mapping; duplicate or odd keys are reported."""
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        if not isinstance(node, yaml.MappingNode):
            return out
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.report(line_of(key_node), "error", f"{where}: a key must be a plain name")
                continue
            key = key_node.value
            if key == "<<":
                self.report(line_of(key_node), "error",
                            f"{where}: YAML merge keys (<<) are not supported")
                continue
            if key in out:
                self.report(line_of(key_node), "error", f"{where}: duplicate key '{key}' "
                            f"(first at line {line_of(out[key][0])}; YAML keeps the last)")
            out[key] = (key_node, value_node)
        return out

    def check_keys(self, items: dict[str, tuple[yaml.Node, yaml.Node]], where: str,
                   understood: set[str], ignored: dict[str, str]) -> None:
        """Report keys that are ignored (with the reason) and keys nobody knows."""
        known = sorted(understood | set(ignored))
        for key, (key_node, _) in items.items():
            if key in understood:
                continue
            path = f"{where}.{key}" if where else key
            if key in ignored:
                self.report(line_of(key_node), "ignored", f"{path}: {ignored[key]}")
            else:
                self.report(line_of(key_node), "warning",
                            f"unknown key '{path}' is not used{suggest(key, known)}")

    # -- typed values -----------------------------------------------------------------------
    def construct(self, node: yaml.Node) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:
            raise self.fatal(_mark_line(exc) or line_of(node), _yaml_message(exc)) from None

    def is_null(self, node: yaml.Node) -> bool:
        return isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")

    def string(self, node: yaml.Node | None, where: str) -> str | None:
        if node is None:
            return None
        value = self.construct(node) if isinstance(node, yaml.ScalarNode) else None
        if isinstance(value, str):
            return value
        self.report(line_of(node), "error", f"{where} must be a string, got {type_name(node)}")
        return None

    def integer(self, node: yaml.Node | None, where: str, minimum: int | None = None) -> int | None:
        if node is None:
            return None
        value = self.construct(node) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, int) or isinstance(value, bool):
            self.report(line_of(node), "error",
                        f"{where} must be an integer, got {type_name(node)}")
            return None
        if minimum is not None and value < minimum:
            self.report(line_of(node), "error", f"{where} must be at least {minimum}, got {value}")
            return None
        return value

    def boolean(self, node: yaml.Node | None, where: str) -> bool | None:
        if node is None:
            return None
        value = self.construct(node) if isinstance(node, yaml.ScalarNode) else None
        if isinstance(value, bool):
            return value
        self.report(line_of(node), "error", f"{where} must be true or false, got {type_name(node)}")
        return None

    def number(self, node: yaml.Node | None, where: str) -> float | None:
        if node is None:
            return None
        value = self.construct(node) if isinstance(node, yaml.ScalarNode) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        self.report(line_of(node), "error", f"{where} must be a number, got {type_name(node)}")
        return None

    def string_list(self, node: yaml.Node | None, where: str) -> list[str]:
        if node is None:
            return []
        if not isinstance(node, yaml.SequenceNode):
            self.report(line_of(node), "error", f"{where} must be a list of strings, "
                        f"got {type_name(node)}")
            return []
        out = []
        for index, item in enumerate(node.value):
            text = self.string(item, f"{where}[{index}]")
            if text is not None:
                out.append(text)
        return out

    def scalar_text(self, node: yaml.Node, where: str) -> str | None:
        """A scalar as configuration text: booleans as yes/no, numbers as written."""
        if not isinstance(node, yaml.ScalarNode) or self.is_null(node):
            self.report(line_of(node), "error",
                        f"{where} must be a single value, got {type_name(node)}")
            return None
        value = self.construct(node)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, str):
            return value
        return node.value

    def line_of_text(self, node: yaml.Node, needle: str) -> int | None:
        """Line of the first occurrence of `needle` inside the source of `node`."""
        start, end = node.start_mark.index, node.end_mark.index
        pos = self.text.find(needle, start, end) if needle else -1
        if pos < 0:
            return None
        return node.start_mark.line + 1 + self.text.count("\n", start, pos)
