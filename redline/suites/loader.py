"""load_test: one suite file (upstream version 0.4 plus redline's `redline:` block) -> TestSpec."""
from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from redline.core.metrics import INSTRUCTIONS, TIME

from . import roles
from .errors import Diagnostic, SpecError
from .keyspace import unreachable_keyspace
from .memtier import parse_client_arguments, split_command
from .model import DbConfig, TestSpec, ToolInvocation
from .owned import owned_command, owned_server_parameter, server_parameter_note
from .parallel import parallel_warnings
from .yamlnodes import NodeReader, compose_file, line_of, suggest, type_name

SUPPORTED_VERSION = "0.4"
MEMTIER_TOOL = "memtier_benchmark"

TOP_LEVEL_KEYS = {
    "version", "name", "description", "dbconfig", "tested-groups", "tested-commands",
    "priority", "redis-topologies", "build-variants", "clientconfig", "clientconfigs", "redline",
}
TOP_LEVEL_IGNORED = {
    "exporter": "RedisTimeSeries export settings of the upstream runner; redline stores "
                "every metric of every run itself",
}
DBCONFIG_KEYS = {
    "configuration-parameters", "check", "dataset", "dataset_name", "dataset_description",
    "init_commands", "init_lua", "preload_tool", "preload_before_replica",
}
RESOURCES_REASON = ("container resource requests of the upstream runner; redline pins server "
                    "and client to disjoint cores itself")
DBCONFIG_IGNORED = {"resources": RESOURCES_REASON}
CHECK_KEYS = {"keyspacelen"}
TOOL_KEYS = {"tool", "arguments", "timeout"}
TOOL_IGNORED = {
    "run_image": "container image of the upstream runner; redline runs redline-load natively",
    "resources": RESOURCES_REASON,
    "scalability": "process scaling of the upstream client container; redline runs one "
                   "client process",
}

# redline's own top-level block: key -> kind.
EXTENSION_KEYS = {"dataset-scale": "positive number", "expect-misses": "boolean", "measure": "measure"}
MEASURES = (TIME, INSTRUCTIONS)           # how the test is measured (as `--measure`)


def load_test(path: Path) -> TestSpec:
    """Read one test file. Raises SpecError when no test can be built from it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(path, None, "no such file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SpecError(path, None, f"cannot read: {exc.strerror}") from None
    root, loader = compose_file(path, text)
    if root is None:
        raise SpecError(path, 1, "empty file: expected a test suite mapping")
    if not isinstance(root, yaml.MappingNode):
        raise SpecError(path, line_of(root),
                        f"a test suite must be a mapping of keys, got {type_name(root)}")
    return _SpecBuilder(NodeReader(path, text, loader)).build(root)


class _SpecBuilder:
    def __init__(self, reader: NodeReader):
        self.r = reader
        self.dropped: list[Diagnostic] = []   # redline-owned settings the suite gave

    def _drop(self, line: int | None, message: str) -> None:
        """A redline-owned setting in the suite: a warning, and not used (redline.suites.owned)."""
        self.r.report(line, "warning", message)
        self.dropped.append(self.r.diagnostics[-1])

    def build(self, root: yaml.MappingNode) -> TestSpec:
        r = self.r
        items = r.entries(root, "suite")
        r.check_keys(items, "", TOP_LEVEL_KEYS, TOP_LEVEL_IGNORED)
        value = lambda key: items[key][1] if key in items else None  # noqa: E731

        version = self._version(items, root)
        name = r.string(value("name"), "name")
        if name is None:
            if "name" not in items:
                r.report(line_of(root), "error", "missing 'name'")
            name = r.path.stem
        description = r.string(value("description"), "description") or ""
        priority = r.integer(value("priority"), "priority")
        db = self._dbconfig(value("dbconfig"), root)
        clients = self._clients(items, root)
        spec = TestSpec(
            name=name, path=r.path, description=description, version=version,
            tested_commands=r.string_list(value("tested-commands"), "tested-commands"),
            tested_groups=r.string_list(value("tested-groups"), "tested-groups"),
            priority=priority,
            topologies=r.string_list(value("redis-topologies"), "redis-topologies"),
            build_variants=r.string_list(value("build-variants"), "build-variants"),
            db=db, client=clients[-1], extensions=self._extensions(value("redline")),
            diagnostics=r.diagnostics, clients=clients, dropped=self.dropped,
        )
        self._cross_checks(spec, items, root)
        spec.diagnostics.sort(key=lambda d: d.line or 0)
        return spec

    # -- top level ---------------------------------------------------------------------------
    def _version(self, items, root) -> str | None:
        r = self.r
        if "version" not in items:
            r.report(line_of(root), "warning",
                     f"missing 'version' (redline reads version {SUPPORTED_VERSION})")
            return None
        node = items["version"][1]
        if not isinstance(node, yaml.ScalarNode) or r.is_null(node):
            r.report(line_of(node), "error", f"version must be a number such as "
                     f"{SUPPORTED_VERSION}, got {type_name(node)}")
            return None
        if node.value != SUPPORTED_VERSION:
            r.report(line_of(node), "warning", f"version {node.value}: redline reads version "
                     f"{SUPPORTED_VERSION}; keys may be misread")
        return node.value

    def _extensions(self, node) -> dict:
        r = self.r
        if node is None:
            return {}
        if not isinstance(node, yaml.MappingNode):
            r.report(line_of(node), "error", f"redline must be a mapping, got {type_name(node)}")
            return {}
        out: dict = {}
        for key, (key_node, value_node) in r.entries(node, "redline").items():
            kind = EXTENSION_KEYS.get(key)
            if kind is None:
                r.report(line_of(key_node), "error", f"unknown key 'redline.{key}'"
                         f"{suggest(key, sorted(EXTENSION_KEYS))}; known: "
                         + ", ".join(sorted(EXTENSION_KEYS)))
            elif kind == "positive number":
                number = r.number(value_node, f"redline.{key}")
                if number is not None and number <= 0:
                    r.report(line_of(value_node), "error",
                             f"redline.{key} must be above 0, got {number:g}")
                elif number is not None:
                    out[key] = number
            elif kind == "measure":
                text = r.string(value_node, f"redline.{key}")
                if text is not None and text not in MEASURES:
                    r.report(line_of(value_node), "error",
                             f"redline.{key} must be {' or '.join(MEASURES)}, got {text!r}")
                elif text is not None:
                    out[key] = text
            else:
                flag = r.boolean(value_node, f"redline.{key}")
                if flag is not None:
                    out[key] = flag
        return out

    # -- dbconfig ----------------------------------------------------------------------------
    def _dbconfig(self, node, root) -> DbConfig:
        r = self.r
        db = DbConfig(configuration_parameters={}, preload=None, init_commands=[],
                      init_lua=None, keyspacelen=None, dataset_name=None, dataset_url=None)
        if node is None:
            r.report(line_of(root), "warning", "missing 'dbconfig': the server runs with "
                     "default configuration and an empty database")
            return db
        if not isinstance(node, yaml.MappingNode):
            r.report(line_of(node), "error", f"dbconfig must be a mapping, got {type_name(node)}")
            return db
        items = r.entries(node, "dbconfig")
        r.check_keys(items, "dbconfig", DBCONFIG_KEYS, DBCONFIG_IGNORED)
        value = lambda key: items[key][1] if key in items else None  # noqa: E731
        db.configuration_parameters = self._config_parameters(value("configuration-parameters"))
        db.keyspacelen = self._check(value("check"))
        db.dataset_url = r.string(value("dataset"), "dbconfig.dataset")
        db.dataset_name = r.string(value("dataset_name"), "dbconfig.dataset_name")
        db.dataset_description = r.string(value("dataset_description"),
                                          "dbconfig.dataset_description")
        db.init_commands = self._init_commands(value("init_commands"))
        db.init_lua = r.string(value("init_lua"), "dbconfig.init_lua")
        db.preload_before_replica = bool(
            r.boolean(value("preload_before_replica"), "dbconfig.preload_before_replica"))
        if "preload_tool" in items:
            db.preload = self._tool(items["preload_tool"][1], items["preload_tool"][0],
                                    "dbconfig.preload_tool")
        return db

    def _config_parameters(self, node) -> dict[str, str]:
        r = self.r
        if node is None:
            return {}
        if not isinstance(node, yaml.MappingNode):
            r.report(line_of(node), "error", "dbconfig.configuration-parameters must be a "
                     f"mapping of server config names to values, got {type_name(node)}")
            return {}
        out = {}
        for key, (key_node, value_node) in r.entries(node, "dbconfig.configuration-parameters").items():
            if owned_server_parameter(key):
                self._drop(line_of(key_node), f"dbconfig.configuration-parameters: {server_parameter_note(key)}")
                continue
            text = r.scalar_text(value_node, f"dbconfig.configuration-parameters.{key}")
            if text is not None:
                out[key] = text
        return out

    def _check(self, node) -> int | None:
        r = self.r
        if node is None:
            return None
        if not isinstance(node, yaml.MappingNode):
            r.report(line_of(node), "error", f"dbconfig.check must be a mapping, "
                     f"got {type_name(node)}")
            return None
        items = r.entries(node, "dbconfig.check")
        r.check_keys(items, "dbconfig.check", CHECK_KEYS, {})
        if "keyspacelen" not in items:
            return None
        return r.integer(items["keyspacelen"][1], "dbconfig.check.keyspacelen", minimum=0)

    def _init_commands(self, node) -> list[list[str]]:
        r = self.r
        where = "dbconfig.init_commands"
        if node is None or r.is_null(node):
            return []
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        if isinstance(node, yaml.MappingNode):
            r.report(line_of(node), "error", f"{where} must be a command string or a list of "
                     f"commands, got {type_name(node)}")
            return []
        out = []
        for item in items:
            if isinstance(item, yaml.SequenceNode):
                argv = [r.scalar_text(part, f"{where} argument") for part in item.value]
                if None not in argv and argv:
                    self._init_command(out, item, [str(a) for a in argv])
                elif not argv:
                    r.report(line_of(item), "error", f"{where}: empty command")
                continue
            text = r.string(item, f"{where} entry")
            if text is None:
                continue
            try:
                argv = split_command(text)
            except ValueError as exc:
                r.report(line_of(item), "error", f"{where}: {exc}")
                continue
            if argv:
                self._init_command(out, item, argv)
            else:
                r.report(line_of(item), "error", f"{where}: empty command")
        return out

    def _init_command(self, out: list[list[str]], item, argv: list[str]) -> None:
        """An init command, unless it changes what redline owns (an error at its line)."""
        reason = owned_command(argv)
        if reason:
            self.r.report(line_of(item), "error", f"dbconfig.init_commands: {reason}")
        else:
            out.append(argv)

    # -- clients -----------------------------------------------------------------------------
    def _clients(self, items, root) -> list[ToolInvocation]:
        r = self.r
        if "clientconfig" in items and "clientconfigs" in items:
            r.report(line_of(items["clientconfigs"][0]), "error",
                     "both 'clientconfig' and 'clientconfigs' given; using 'clientconfigs'")
        if "clientconfigs" in items:
            key_node, node = items["clientconfigs"]
            if not isinstance(node, yaml.SequenceNode) or not node.value:
                raise r.fatal(line_of(node), "clientconfigs must be a non-empty list of client "
                              f"configurations, got {type_name(node)}")
            return [self._tool(item, item, f"clientconfigs[{index}]")
                    for index, item in enumerate(node.value)]
        if "clientconfig" in items:
            key_node, node = items["clientconfig"]
            return [self._tool(node, key_node, "clientconfig")]
        raise r.fatal(line_of(root), "missing 'clientconfig': a test needs a client "
                      "(clientconfig.tool and clientconfig.arguments)")

    def _tool(self, node, key_node, where: str) -> ToolInvocation:
        r = self.r
        if not isinstance(node, yaml.MappingNode):
            raise r.fatal(line_of(node), f"{where} must be a mapping with 'tool' and "
                          f"'arguments', got {type_name(node)}")
        items = r.entries(node, where)
        r.check_keys(items, where, TOOL_KEYS, TOOL_IGNORED)
        if "tool" not in items:
            raise r.fatal(line_of(key_node), f"{where}: missing 'tool'")
        tool_node = items["tool"][1]
        tool = r.construct(tool_node) if isinstance(tool_node, yaml.ScalarNode) else None
        if not isinstance(tool, str) or not tool:
            raise r.fatal(line_of(tool_node), f"{where}.tool must be a tool name, "
                          f"got {type_name(tool_node)}")
        if "arguments" not in items:
            raise r.fatal(line_of(key_node), f"{where}: missing 'arguments'")
        args_key, args_node = items["arguments"]
        argv = self._argv(args_node, f"{where}.arguments")
        timeout = None
        if "timeout" in items:
            timeout = r.integer(items["timeout"][1], f"{where}.timeout", minimum=1)
        invocation = ToolInvocation(tool=tool, arguments=argv, line=line_of(args_key),
                                    timeout_seconds=timeout)
        if tool == MEMTIER_TOOL:
            invocation.workload = parse_client_arguments(argv)
            for problem in invocation.workload.problems:
                line = self._token_line(args_node, problem.token) or line_of(args_key)
                message = f"{where}.arguments: {problem.message}"
                if problem.owned:
                    self._drop(line, message)
                else:
                    r.report(line, problem.severity, message)
        elif roles.is_role(tool):
            for problem in roles.check_arguments(tool, argv):
                line = self._token_line(args_node, problem.token) or line_of(args_key)
                if problem.owned:
                    self._drop(line, f"{where}.arguments: {problem.message}")
                else:
                    r.report(line, problem.severity, f"{where}.arguments: {problem.message}")
        else:
            r.report(line_of(tool_node), "warning", f"{where}.tool '{tool}' is neither "
                     f"{MEMTIER_TOOL}-compatible nor one of redline-load's roles "
                     f"({', '.join(roles.roles())}), so `redline run` skips this test")
        return invocation

    def _argv(self, node, where: str) -> list[str]:
        r = self.r
        if isinstance(node, yaml.SequenceNode):
            argv = [r.scalar_text(item, f"{where} item") for item in node.value]
            if None in argv:
                raise r.fatal(line_of(node), f"{where}: every list item must be a single value")
            return [str(a) for a in argv]
        if isinstance(node, yaml.ScalarNode) and r.is_null(node):
            return []
        text = r.construct(node) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(text, str):
            raise r.fatal(line_of(node), f"{where} must be a string of command-line arguments "
                          f"(or a list of them), got {type_name(node)}")
        try:
            return shlex.split(text)
        except ValueError as exc:
            raise r.fatal(line_of(node), f"{where}: cannot split like a shell: {exc}") from None

    def _token_line(self, node, token: str | None) -> int | None:
        if not token:
            return None
        line = self.r.line_of_text(node, token)
        if line is None and token.startswith("-"):
            line = self.r.line_of_text(node, token.split("=", 1)[0])
        return line

    # -- whole-file checks -------------------------------------------------------------------
    def _cross_checks(self, spec: TestSpec, items, root) -> None:
        r = self.r
        db = spec.db
        fills = db.preload or db.init_commands or db.init_lua or db.dataset_url or db.dataset_name
        if db.keyspacelen and not fills:
            r.report(line_of(root) if "dbconfig" not in items else line_of(items["dbconfig"][0]),
                     "warning", f"dbconfig.check.keyspacelen is {db.keyspacelen} but nothing "
                     "fills the database (no preload_tool, init_commands, init_lua or dataset)")
        # what the suite says it builds is about the preload; a client only adds to it
        invocations = [("dbconfig.preload_tool", db.preload, (spec.name, db.dataset_name))] if db.preload else []
        invocations += [("clientconfig", client, ()) for client in spec.clients]
        for where, invocation, claims in invocations:
            if invocation.workload is not None:
                for warning in parallel_warnings(invocation.workload, *claims):
                    r.report(invocation.line or line_of(root), "warning", f"{where}.arguments: {warning}")
        shortfall = unreachable_keyspace(db)
        if shortfall:
            dbconfig = items["dbconfig"][1]
            r.report(r.line_of_text(dbconfig, "keyspacelen") or line_of(dbconfig), "warning", shortfall)
        if "tested-commands" not in items:
            r.report(line_of(root), "warning", "missing 'tested-commands'")
