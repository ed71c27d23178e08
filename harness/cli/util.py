"""Argument parsing helpers shared by the subcommands: one-line errors, typed values, checks,
and help texts and choices computed only when needed (:class:`LazyText`, :class:`LazyChoices`:
building a parser imports none of torch, pandas or sglang, so a mistyped flag fails at once)."""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence

TYPE_CHECKING = False  # as typing.TYPE_CHECKING (mypy reads the name), without importing typing

if TYPE_CHECKING:  # typing's names, for the checker only: ``radixbench --help`` skips typing
    from typing import Any, NoReturn


def radixbench_module(name: str) -> Any:
    """``radixbench.<name>``, imported now (what a lazy help text or choice list reads)."""
    import importlib

    return importlib.import_module(f"radixbench.{name}")


def lazy_names(module: str, attr: str) -> Callable[[], list[str]]:
    """The names of registry ``radixbench.<module>.<attr>``, read when called."""
    return lambda: list(getattr(radixbench_module(module), attr))


class LazyText:
    """An option's help text made by ``make()`` when ``--help`` is formatted (once). argparse
    reads a help as truthy, ``strip()``-able and ``%``-formatted; :class:`DefaultsFormatter`
    also as text to append to."""

    def __init__(self, make: Callable[[], str]) -> None:
        self._make = functools.cache(make)

    def __str__(self) -> str:
        return self._make()

    def __bool__(self) -> bool:
        return True

    def strip(self) -> str:
        return str(self).strip()

    def __mod__(self, params: Any) -> str:
        return str(self) % params

    def __contains__(self, part: str) -> bool:
        return part in str(self)


def lazy_help(make: Callable[[], str]) -> str:
    """A help text made by ``make()`` when ``--help`` is formatted (a :class:`LazyText`).
    Typed as ``str``, the type argparse declares for a help: argparse reads it as text only
    through what :class:`LazyText` answers."""
    return LazyText(make)  # type: ignore[return-value]


class LazyChoices(Sequence[str]):
    """An option's choices, listed by ``names()`` the first time argparse checks a value or
    formats the help (``names`` may import what defines them)."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        self._names = functools.cache(lambda: tuple(names()))

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __getitem__(self, i: Any) -> Any:
        return self._names()[i]


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
        text = str(action.help or "")
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
            return text
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


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def token_count(text: str) -> int:
    """A positive token count written as SGLang 0.5.23 reads ``--max-total-tokens``
    (``human_readable_int``, ``srt/utils/common.py:3394-3425``): an integer, or a number with
    an SI suffix (``96k`` = 96,000; decimals allowed: ``25.6k``) or an integer with an IEC
    suffix (``64Ki`` = 65,536); suffixes are case-sensitive."""
    import re
    from decimal import Decimal

    value = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if m and m.group(2) in _IEC and "." in m.group(1):
        raise argparse.ArgumentTypeError(f"no decimals with an IEC suffix: {text!r}")
    if m:
        number, suffix = m.groups()
        count = int(number) * _IEC[suffix] if suffix in _IEC else int(Decimal(number) * _SI[suffix])
    else:
        try:
            count = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a token count: {text!r} (an integer, or e.g. 96k, 1.5M, 64Ki)"
            ) from None
    if count <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return count


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


def preload(modules: Sequence[str]) -> None:
    """Import ``modules`` (a command's heavy ones, once its arguments are checked) with the
    cyclic garbage collector paused, then freeze what exists (``gc.freeze``). Importing torch,
    pandas and the simulator makes ~300,000 container objects and next to no garbage, yet the
    collector walked the growing heap five times meanwhile (~0.35 s of CPU in every compare
    run) and would walk those objects again in every later full collection; frozen, they are
    never walked again (nor copied by forked plot workers' collections). Does nothing when
    the modules are already imported (a second in-process call, as in tests)."""
    missing = [m for m in modules if m not in sys.modules]
    if not missing:
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in missing:
            importlib.import_module(name)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
