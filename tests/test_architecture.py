"""The package's layers (docs/architecture.md): every module of redline/ lives in a concept folder
(but the entry point), and no import runs upward — a folder imports only from itself and from the
folders below it in LAYERS. Read from the source with ast, imports inside functions included, so
a lazy import cannot hide an upward arrow."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "redline"

# Bottom to top. A folder may import from itself and from any folder before it.
LAYERS = ["core", "system", "datasets", "suites", "builder", "profile", "server", "load", "topology", "engine",
          "bench", "instructions", "analysis", "store", "output", "export", "lab", "bisect", "accuracy", "fleet", "commands",
          "cli"]
TOP_LEVEL_MODULES = {"__init__.py", "cli.py"}       # the package's face and the entry point


def folder_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "redline" else None


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every `redline.…` import in the file, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name) for name in names[:1]]
            if node.module == "redline":       # `from redline import core` names a folder
                found += [(node.lineno, f"redline.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("redline.")]


def module_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_lives_in_a_concept_folder():
    stray = [p.name for p in PACKAGE.glob("*.py") if p.name not in TOP_LEVEL_MODULES]
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert not stray, f"modules outside a concept folder: {stray}"
    assert folders <= set(LAYERS), f"folders missing from LAYERS: {sorted(folders - set(LAYERS))}"


@pytest.mark.parametrize("path", module_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_upward(path):
    relative = path.relative_to(PACKAGE)
    here = relative.parts[0] if len(relative.parts) > 1 else relative.stem
    if here == "__init__":
        return
    rank = LAYERS.index(here)
    upward = [f"line {line}: {name}" for line, name in imports(path)
              if folder_of(name) in LAYERS and LAYERS.index(folder_of(name)) > rank]
    assert not upward, f"{relative} ({here}) imports from above it: {upward}"


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: an import of a higher folder inside a function is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from redline.commands.session import finish\n")
    assert imports(sample) == [(2, "redline.commands.session")]
    assert LAYERS.index("commands") > LAYERS.index("engine")


def names_imported(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every `from redline… import name` in the file, inside functions too."""
    return [(node.lineno, node.module, alias.name)
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            and (node.module + ".").startswith("redline.")
            for alias in node.names]


def missing_names(path: Path) -> list[str]:
    """The imported names of `path` that their module does not define: a lazy import of a name
    that moved fails only when its function runs, so it is looked up here."""
    import importlib.util
    missing = []
    for line, module, name in names_imported(path):
        found = importlib.import_module(module)
        submodule = hasattr(found, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None
        if not hasattr(found, name) and not submodule:
            missing.append(f"line {line}: {name} from {module}")
    return missing


REPOSITORY = PACKAGE.parent
IMPORTING_FILES = [p for folder in ("redline", "scripts", "tests")
                   for p in sorted((REPOSITORY / folder).rglob("*.py")) if "__pycache__" not in p.parts]


@pytest.mark.parametrize("path", IMPORTING_FILES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_every_imported_name_exists(path):
    missing = missing_names(path)
    assert not missing, f"{path.relative_to(REPOSITORY)} imports names that do not exist: {missing}"


def test_the_name_check_sees_a_lazy_import_of_a_moved_name(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from redline.bench.server_runner import NOT_A_NAME\n"
                      "from redline.core import numbers\n")
    assert missing_names(sample) == ["line 2: NOT_A_NAME from redline.bench.server_runner"]
