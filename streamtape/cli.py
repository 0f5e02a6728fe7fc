"""The ``streamtape`` command line: a click group, and the one place errors become lines.

Every user mistake surfaces as a :class:`~streamtape.errors.StreamtapeError`
(or a click usage error) and is printed here as one line on stderr with exit
status 2 (:data:`EXIT_USER_ERROR`): the library's exceptions know nothing of
exit codes. Commands live in :mod:`streamtape.commands`, one module each.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from . import commands
from ._version import __version__
from .errors import StreamtapeError

EXIT_USER_ERROR = 2
"""Exit status for a user mistake: a bad option, a bad file, no match."""
EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""


class _LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs.

    The commands are the public modules of :mod:`streamtape.commands`, one
    command each, named as the module (less a trailing ``_``: ``import_`` is
    ``import``). Listing them reads the package's directory and imports
    nothing, so ``streamtape --version`` and ``streamtape show`` pay only for
    themselves (click's documented lazy-group pattern).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name.removesuffix("_") for name in _command_modules())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        modules = _command_modules()
        module_name = next((m for m in (cmd_name, f"{cmd_name}_") if m in modules), None)
        if module_name is None:
            return None
        module = importlib.import_module(f"{commands.__name__}.{module_name}")
        found: list[click.Command] = [c for c in getattr(module, "commands", ()) if c.name == cmd_name]
        return found[0] if found else None


def _command_modules() -> set[str]:
    return {m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")}


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="streamtape")
def cli() -> None:
    """Record, replay and compare streaming LLM responses."""


def error_line(message: str) -> None:
    click.echo(f"streamtape: error: {message}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the group, turn every user error into one line and exit 2."""
    try:
        rv = cli.main(args=argv, prog_name="streamtape", standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.UsageError as e:
        hint = f" (see 'streamtape {e.ctx.command_path.partition(' ')[2]} --help')".replace(
            "streamtape  --help", "streamtape --help"
        ) if e.ctx else ""
        error_line(f"{e.format_message()}{hint}")
        sys.exit(EXIT_USER_ERROR)
    except click.ClickException as e:
        error_line(e.format_message())
        sys.exit(e.exit_code if e.exit_code else EXIT_USER_ERROR)
    except StreamtapeError as e:
        error_line(str(e))
        sys.exit(EXIT_USER_ERROR)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
