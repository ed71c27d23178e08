"""Argument parsing helpers shared by the subcommands: one-line errors, typed values, checks."""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(Exception):
    """Bad command-line input; reported in one line."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors become ``UsageError`` (one line, no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends each option's line with ``(default: X)`` where the option has a default
    worth saying (not None, not a ``store_true`` flag's False) and its help does not already
    say one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == ""
            or default == []
            or default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: %(default)s)"


def csv_list(text: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``; empty lists rejected."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def check_scheduler(address: str | None) -> None:
    """``--scheduler`` of ``sweep`` / ``study``: None, or a Dask scheduler address
    (``tcp://``, ``tls://`` or ``inproc://``). Raises :class:`UsageError` otherwise."""
    if address and not address.startswith(("tcp://", "tls://", "inproc://")):
        raise UsageError(f"--scheduler: expected tcp://host:port, got {address!r}")
