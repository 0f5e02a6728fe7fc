"""The public line: ``__all__`` of the package and of the faces users import, held to what they hold.

In the manner of httpx's ``tests/test_exported_members.py`` and trio's
``_tests/test_exports.py``: every name in ``__all__`` resolves (the lazy ones
too) without a warning and comes from streamtape; every public name of a face
is in its ``__all__``, save the legacy names, which warn; ``__all__`` is
sorted; every exception a public function raises is a
:class:`~streamtape.errors.StreamtapeError` exported from ``streamtape``, and
the tree drawn in :mod:`streamtape.errors` is the real one. And
``import streamtape`` stays light: the lazy names exist for that.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
import types
import typing
import warnings
from pathlib import Path
from typing import Any

import pytest

import streamtape
import streamtape.cassette
import streamtape.errors

FACES = (
    "streamtape",
    "streamtape.cassette",
    "streamtape.shapes",
    "streamtape.transport",
    "streamtape.serve",
    "streamtape.profiles",
)
"""The modules users import names from."""

NOT_EXPORTED: dict[str, dict[str, str]] = {}
"""Public-looking names of a face that are not API, each with its reason."""

DEPRECATED: dict[str, tuple[str, ...]] = {
    "streamtape": ("Chunk",),
    "streamtape.cassette": tuple(streamtape.cassette._DEPRECATED),
}
"""The legacy names: not in ``__all__``, and each warns when used."""

INTERNAL_EXCEPTIONS: dict[str, str] = {
    "streamtape.interop.common.Malformed": "the readers turn it into InteropError, adding file and position",
    "streamtape.profiles.parse._Bad": "parse_profile turns it into ProfileError",
    "streamtape.serve.request.BadRequest": "the replay server answers it (400, 408, ...) and closes",
    "streamtape.serve.websocket.BadUpgrade": "the replay server answers it, as a BadRequest",
    "streamtape.shadow.chat_mapping.Unmappable": "the shadow sender skips a request the other API cannot express",
}
"""Exceptions of the package that are raised and caught inside it, each with where it ends."""

FORBIDDEN_ON_IMPORT = (
    "httpx",
    "httpx2",
    "httpcore",
    "h11",
    "h2",
    "anyio",
    "requests",
    "urllib3",
    "mitmproxy",
    "asyncio",
    "yaml",
    "click",
    "wsproto",
    "streamtape.transport",
    "streamtape.serve",
    "streamtape.profiles",
    "streamtape.shapes",
    "streamtape.mitm",
)
"""What ``import streamtape`` must not load (see ``_LAZY`` in streamtape/__init__.py)."""


def _face(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _is_tooling(name: str, value: object) -> bool:
    """A module-level name that is import machinery, not API: a module (a submodule or an
    import), ``from __future__ import annotations``, ``TYPE_CHECKING``, or one of typing's
    own objects under its own name (``Any``)."""
    if isinstance(value, types.ModuleType) or type(value).__module__ == "__future__":
        return True
    if name == "TYPE_CHECKING":
        return True
    return getattr(typing, name, None) is value


def _public_names(module: types.ModuleType) -> list[str]:
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not _is_tooling(name, value)
    ]


def _isort_key(name: str) -> tuple[int, list[int | str]]:
    """ruff's RUF022 order: SCREAMING_CASE constants, then CamelCase, then the rest, each
    in natural order."""
    group = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return group, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _resolve(module: types.ModuleType, name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return getattr(module, name)


# --------------------------------------------------------------------------
# __all__ of each face


@pytest.mark.parametrize("face", FACES)
def test_every_name_in_all_resolves_without_a_warning(face: str) -> None:
    module = _face(face)
    assert isinstance(module.__all__, list)
    for name in module.__all__:
        _resolve(module, name)


@pytest.mark.parametrize("face", FACES)
def test_all_names_each_public_name_once(face: str) -> None:
    module = _face(face)
    assert len(set(module.__all__)) == len(module.__all__)
    missing = sorted(set(_public_names(module)) - set(module.__all__) - set(NOT_EXPORTED.get(face, {})))
    assert not missing, f"{face}: public names missing from __all__: {missing}"


@pytest.mark.parametrize("face", FACES)
def test_all_is_sorted(face: str) -> None:
    names = _face(face).__all__
    assert names == sorted(names, key=_isort_key)


@pytest.mark.parametrize("face", FACES)
def test_every_class_and_function_in_all_lives_in_streamtape(face: str) -> None:
    module = _face(face)
    for name in module.__all__:
        value = _resolve(module, name)
        if inspect.isclass(value) or inspect.isroutine(value):
            assert value.__module__.split(".")[0] == "streamtape", (name, value.__module__)


@pytest.mark.parametrize("face", FACES)
def test_the_names_kept_out_of_all_are_no_api_and_exist(face: str) -> None:
    module = _face(face)
    for name in NOT_EXPORTED.get(face, {}):
        assert name in vars(module)
        assert name not in module.__all__


def test_star_import_gives_all_and_nothing_else() -> None:
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from streamtape import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == sorted(streamtape.__all__)


def test_lazy_names_are_in_all_and_are_their_subpackages_objects() -> None:
    lazy: dict[str, str] = streamtape._LAZY
    for name, sub in lazy.items():
        assert name in streamtape.__all__
        assert name not in vars(streamtape), f"{name} is imported eagerly"
        assert _resolve(streamtape, name) is getattr(_face(f"streamtape.{sub}"), name)
    eager = set(streamtape.__all__) - set(lazy)
    assert eager <= set(vars(streamtape))


def test_dir_lists_the_lazy_names_too() -> None:
    assert set(streamtape.__all__) <= set(dir(streamtape))


@pytest.mark.parametrize(
    ("face", "name"), [(face, name) for face, names in DEPRECATED.items() for name in names]
)
def test_legacy_names_warn_and_stay_out_of_all(face: str, name: str) -> None:
    module = _face(face)
    assert name not in module.__all__
    assert name not in vars(module)
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(face)}\.{name} is deprecated; use "):
        getattr(module, name)


@pytest.mark.parametrize("face", FACES)
def test_an_unknown_name_is_an_attribute_error(face: str) -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _resolve(_face(face), "no_such_name")


def test_the_top_level_has_only_its_own_legacy_names() -> None:
    """The cassette's legacy constants were never top-level names: no warning, no value."""
    with pytest.raises(AttributeError):
        _resolve(streamtape, "COMPLETE")


# --------------------------------------------------------------------------
# Exceptions


def _error_classes() -> list[type[streamtape.StreamtapeError]]:
    return [
        value
        for value in vars(streamtape.errors).values()
        if inspect.isclass(value)
        and issubclass(value, streamtape.StreamtapeError)
        and value.__module__ == "streamtape.errors"
    ]


def test_every_error_class_is_exported_from_streamtape() -> None:
    for cls in _error_classes():
        assert cls.__name__ in streamtape.__all__
        assert getattr(streamtape, cls.__name__) is cls


def test_the_drawn_exception_tree_is_the_class_tree() -> None:
    """errors.py draws its tree at its top; the drawing names every class, under its base."""
    doc = streamtape.errors.__doc__ or ""
    block = doc.split("The tree::", 1)[1].strip("\n").split("\n\n", 1)[0]
    drawn: dict[str, str | None] = {}
    parents: list[str] = []
    for line in block.splitlines():
        m = re.search(r"\b(\w+Error)\b", line)
        assert m, line
        depth = (m.start() - 4) // 4
        parents[depth:] = [m[1]]
        drawn[m[1]] = parents[depth - 1] if depth else None
    real = {
        cls.__name__: (None if cls is streamtape.StreamtapeError else cls.__bases__[0].__name__)
        for cls in _error_classes()
    }
    assert drawn == real


@pytest.mark.parametrize("face", FACES)
def test_exception_types_a_face_offers_are_exported_streamtape_errors(face: str) -> None:
    module = _face(face)
    for name in module.__all__:
        value = _resolve(module, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            assert issubclass(value, streamtape.StreamtapeError), name
            assert getattr(streamtape, value.__name__) is value, name


NOT_IMPORTED: dict[str, str] = {
    "streamtape.rerun.locustfile": "Locust's file, run by Locust: importing it (and locust) monkey-patches "
    "the whole process for gevent; it raises none of the package's errors",
}
"""Modules of the package never imported here, each with its reason."""


def _package_modules() -> list[types.ModuleType]:
    names = ["streamtape"] + [m.name for m in pkgutil.walk_packages(streamtape.__path__, "streamtape.")]
    return [importlib.import_module(n) for n in names if n not in NOT_IMPORTED]


def _raised_classes(module: types.ModuleType) -> set[type[BaseException]]:
    """The package's own exception classes ``module`` raises by name (``raise X(...)``,
    ``raise errors.X``), resolved in its namespace."""
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    out: set[type[BaseException]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        chain: list[str] = []
        while isinstance(target, ast.Attribute):
            chain.insert(0, target.attr)
            target = target.value
        if not isinstance(target, ast.Name) or target.id not in vars(module):
            continue  # a local (raise exc), or a call's result
        value: object = vars(module)[target.id]
        for attr in chain:
            value = getattr(value, attr, None)
        if (
            inspect.isclass(value)
            and issubclass(value, BaseException)
            and value.__module__.split(".")[0] == "streamtape"
        ):
            out.add(value)
    return out


# Importing every module imports mitmproxy, whose dependencies warn: ldap3 about
# pyasn1's names, passlib (mitmproxy 11) about the crypt module.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ldap3.*")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:passlib.*")
def test_every_exception_the_package_raises_is_an_exported_streamtape_error() -> None:
    """Read every module's ``raise`` statements: each of the package's own exception
    types that can reach a caller is a StreamtapeError exported from ``streamtape``."""
    found: dict[str, set[str]] = {}
    for module in _package_modules():
        for cls in _raised_classes(module):
            found.setdefault(f"{cls.__module__}.{cls.__qualname__}", set()).add(module.__name__)
    assert "streamtape.errors.NoMatchError" in found  # the scan sees through imports
    for qualname, raisers in sorted(found.items()):
        if qualname in INTERNAL_EXCEPTIONS:
            continue
        module_name, _, name = qualname.rpartition(".")
        cls = getattr(importlib.import_module(module_name), name)
        assert issubclass(cls, streamtape.StreamtapeError), (qualname, sorted(raisers))
        assert getattr(streamtape, name, None) is cls, (qualname, "not exported", sorted(raisers))
    assert set(INTERNAL_EXCEPTIONS) <= set(found), "an internal exception is no longer raised"


# --------------------------------------------------------------------------
# Import weight


def test_import_streamtape_loads_no_client_proxy_or_server_module() -> None:
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import streamtape\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    ).stdout
    loaded = json.loads(out)
    assert "streamtape.errors" in loaded  # the measurement measures something
    # Not even the cassette code: the CLI imports this package before it knows which
    # command runs, and `streamtape --version` needs none of it.
    assert "streamtape.cassette" not in loaded
    heavy = sorted(
        m for m in loaded for top in FORBIDDEN_ON_IMPORT if m == top or m.startswith(top + ".")
    )
    assert not heavy, f"import streamtape loads {heavy}"


def _modules_after_cli(*argv: str) -> list[str]:
    code = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        f"sys.argv = ['streamtape', *{list(argv)!r}]\n"
        "from streamtape.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    return [m for m in json.loads(done.stderr.splitlines()[-1]) if m.startswith("streamtape")]


def test_the_cli_imports_only_the_command_that_runs() -> None:
    version = _modules_after_cli("--version")
    assert not [m for m in version if m.startswith(("streamtape.commands.", "streamtape.cassette"))], version
    profiles = _modules_after_cli("profiles")
    assert "streamtape.commands.profiles" in profiles
    assert [m for m in profiles if m.startswith("streamtape.commands.")] == ["streamtape.commands.profiles"]


def test_the_cli_lists_every_command_module_without_a_registry() -> None:
    from click.testing import CliRunner

    from streamtape.cli import cli

    modules = sorted(p.stem.removesuffix("_") for p in (Path(streamtape.__file__).parent / "commands").glob("*.py")
                     if not p.name.startswith("_"))
    out = CliRunner().invoke(cli, ["--help"]).output
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == modules
