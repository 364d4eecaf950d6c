"""The ``dsident`` command.

Usage::

    dsident --version
    dsident datasets list                 # the shipped benchmark sets
    dsident datasets show lorenz63        # one set's card (source, equations, sizes, noise)
    dsident datasets make lorenz63        # regenerate its files with the fixed seeds (or: all)

Adding a verb (fit, evaluate, generate, benchmark, sweep, ...)
--------------------------------------------------------------
Verbs are a registry: every module ``dsident/cli_<verb>.py`` is discovered automatically (by file
name, without importing it) and must define::

    def register(subparsers: argparse._SubParsersAction) -> None:
        parser = subparsers.add_parser("<verb>", help="one line shown by `dsident --help`",
                                       description="...")
        parser.add_argument(...)
        parser.set_defaults(handler=run)        # run(args: argparse.Namespace) -> int | None

``run`` returns the exit status (None means 0); ``set_defaults(func=run)`` works too. One module
may register several verbs (``dsident/cli_main_job.py`` adds fit, evaluate, generate, benchmark
and sweep). A ``ValueError``, ``TypeError``,
``FileNotFoundError`` or ``ImportError`` raised by it is printed as ``dsident: error: ...``
with exit status 2 (with ``dsident --debug VERB ...`` it propagates with its traceback); Ctrl-C
(``KeyboardInterrupt``) is one line with exit status 130;
anything else propagates with its traceback. When the verb being run is the
module's name (``dsident datasets ...``), only that module is imported, so a heavy import (torch)
elsewhere does not slow it down; otherwise (and for ``dsident --help``) all verb modules are
imported. The verb ``datasets`` is built in (below) and
the ``_VERBS`` mapping can pin extra verbs that live elsewhere. The CLI only maps options to
public functions: no logic lives here.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Callable, Sequence

from ._version import __version__

__all__ = ["main", "discover_verbs"]

#: Verbs that do not follow the ``dsident/cli_<verb>.py`` naming: verb -> "module:function".
_VERBS: dict[str, str] = {"datasets": "dsident.cli:register_datasets"}


def discover_verbs() -> dict[str, str]:
    """Map each available verb to its ``"module:register"`` entry point (nothing is imported)."""
    verbs = dict(_VERBS)
    package_dir = str(Path(__file__).resolve().parent)
    for info in pkgutil.iter_modules([package_dir]):
        if info.name.startswith("cli_") and not info.ispkg:
            verb = info.name[len("cli_"):].replace("_", "-")
            verbs.setdefault(verb, f"dsident.{info.name}:register")
    return verbs


def _load(entry: str) -> Callable[[argparse._SubParsersAction], None]:
    module, _, function = entry.partition(":")
    return getattr(importlib.import_module(module), function)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The argument parser; registers only the verb named in ``argv`` (all verbs for help)."""
    parser = argparse.ArgumentParser(
        prog="dsident", description="Dynamical systems reconstruction from time series.",
        epilog="Run `dsident COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=f"dsident {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, show its traceback instead of one line (for a bug report)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    verbs = discover_verbs()
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in verbs:
        selected = [first]
    elif first is None and argv and not {"-h", "--help"} & set(argv):
        selected = []                       # e.g. `dsident --version`: no verb module needed
    else:
        selected = sorted(verbs)
    for verb in selected:
        _load(verbs[verb])(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsident`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or getattr(args, "func", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        status = handler(args)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as err:
        # a user's mistake reads best as one line; a bug inside (numpy's "setting an array
        # element with a sequence") reads the same way, so --debug shows where it came from
        if getattr(args, "debug", False):
            raise
        print(f"dsident: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: one line and the shell's status for SIGINT, not a traceback through torch
        if getattr(args, "debug", False):
            raise
        print(f"dsident {args.command}: interrupted; a model is saved whole or not at all, but the other files "
              "of the output folder may be missing", file=sys.stderr)
        return 130
    return 0 if status is None else int(status)


# ----------------------------------------------------------------------------- datasets verb


def register_datasets(subparsers: argparse._SubParsersAction) -> None:
    """``dsident datasets list | show NAME | make NAME``."""
    parser = subparsers.add_parser("datasets", help="list, describe or regenerate the shipped benchmark sets",
                                   description="The shipped benchmark sets (dsident.datasets).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="one line per set").set_defaults(handler=_datasets_list)
    show = actions.add_parser("show", help="print a set's card")
    show.add_argument("name", help="dataset name (see `dsident datasets list`)")
    show.set_defaults(handler=_datasets_show)
    make = actions.add_parser("make", help="regenerate a set's files with its fixed seeds")
    make.add_argument("name", help="dataset name, or `all`")
    make.add_argument("--folder", default=None,
                      help="where to write (default: the data folder; see `dsident datasets list`)")
    make.set_defaults(handler=_datasets_make)


def _datasets_list(args: argparse.Namespace) -> int:
    from . import datasets

    entries = datasets.list()
    width = max(len(e["name"]) for e in entries)
    print(f"data folder: {datasets.data_dir()}")
    for e in entries:
        state = "" if e["available"] else "  [not generated]"
        print(f"{e['name']:<{width}}  {'/'.join(e['splits']):<16}  {e['summary']}{state}")
    return 0


def _datasets_show(args: argparse.Namespace) -> int:
    from . import datasets

    print(datasets.card(args.name))
    return 0


def _datasets_make(args: argparse.Namespace) -> int:
    import time

    from . import datasets

    names = list(datasets.DATASETS) if args.name == "all" else [args.name]
    if args.folder is not None:     # before the sets are simulated, not after
        from .cli_main_job import _check_out

        _check_out(args.folder, "--folder")
    for name in names:
        start = time.perf_counter()
        paths = datasets.make(name, folder=args.folder)
        took = time.perf_counter() - start
        print(f"{name}: wrote {', '.join(str(p) for p in paths)} ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
