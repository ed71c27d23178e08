"""What a run says when the code of an implementation under test raises.

A patch or plug-in whose method raises in the middle of a run (``--impl
sglang-python,sglang-python:raising.py:Raising`` with ``match_prefix`` raising) is neither bad
input nor a divergence: :func:`impl_failure` reads the exception's traceback (and the chain
behind it: simpy re-raises a process's exception with the original as ``__cause__``) and, when
it passed through the implementation's own code, returns :class:`ImplFailed`, one line naming
the spec, the class and the method, what was raised and where:

    impl sglang-python:raising.py:Raising: Raising.match_prefix raised RuntimeError: boom
    (raising.py:6)

The implementation is found in two steps: the outermost frame that belongs to a cache built by
``radixbench.cache.registry.make_cache`` (its ``self`` is that cache: ``registry.spec_of``; or
``make_cache`` itself, for a constructor) gives the spec; from there inwards, the outermost
frame whose ``self`` is an instance of the class the spec loaded (``ImplInfo.cls``, matched
along the MRO: a subclass's inherited methods count) gives the class and method. An error
raised in radixbench's adapter around that class (its own checks) is not the implementation's,
and :func:`impl_failure` returns None for it. The CLI exits with :data:`IMPL_FAILED_STATUS`.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any

__all__ = ["IMPL_FAILED_STATUS", "ImplFailed", "impl_failure"]

#: The exit status of a run stopped by an implementation's own code raising (README's table).
IMPL_FAILED_STATUS = 3


class ImplFailed(Exception):
    """The code of implementation ``spec`` raised: ``cls`` / ``method`` (where it was called,
    e.g. ``Raising`` / ``match_prefix``), ``error`` (``Type: message``, one line) and ``where``
    (``file:line`` of the innermost frame); ``context``: where in a larger run (a study
    point). ``str()`` is the one-line message. Picklable."""

    def __init__(
        self, spec: str, cls: str, method: str, error: str, where: str, context: str = ""
    ) -> None:
        self.spec, self.cls, self.method, self.error, self.where = spec, cls, method, error, where
        self.context = context
        what = f"the constructor of {cls}" if method == "__init__" else f"{cls}.{method}"
        super().__init__(f"{context}impl {spec}: {what} raised {error} ({where})")

    def within(self, context: str) -> ImplFailed:
        """The same failure, its line prefixed by ``context`` (``"study point 3: "``)."""
        return ImplFailed(self.spec, self.cls, self.method, self.error, self.where, context)

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.spec, self.cls, self.method, self.error, self.where, self.context)
        return ImplFailed, args


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its cause or context, and so on (each once)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    return [(f, line) for f, line in traceback.walk_tb(tb)]


def _cache_spec(frame: FrameType) -> str | None:
    """The spec of the cache this frame runs in: ``make_cache``'s ``spec`` argument, or the
    spec the cache that is the frame's ``self`` was built for."""
    from radixbench.cache import registry

    if frame.f_code is registry.make_cache.__code__:
        spec = frame.f_locals.get("spec")
        return spec if isinstance(spec, str) else None
    self = frame.f_locals.get("self")
    return None if self is None else registry.spec_of(self)


def _is_class(obj: Any, qualified: str) -> bool:
    """Whether ``obj``'s class or a base of it is ``module.qualname`` ``qualified``."""
    return any(f"{c.__module__}.{c.__qualname__}" == qualified for c in type(obj).__mro__)


def _where(frame: FrameType, line: int) -> str:
    path = frame.f_code.co_filename
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        rel = path
    return f"{rel if not rel.startswith('..') else path}:{line}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _from(exc: BaseException) -> ImplFailed | None:
    from radixbench.cache import registry

    frames = _frames(exc.__traceback__)
    found = next(
        ((i, s) for i, (f, _) in enumerate(frames) if (s := _cache_spec(f)) is not None), None
    )
    if found is None:
        return None
    i, spec = found
    try:
        cls = registry.resolve(spec).info.cls
    except ValueError:
        return None
    for frame, _ in frames[i:]:
        self = frame.f_locals.get("self")
        if self is not None and _is_class(self, cls):
            last, line = frames[-1]
            return ImplFailed(
                spec, type(self).__qualname__, frame.f_code.co_name, _one_line(exc),
                _where(last, line),
            )  # fmt: skip
    return None


def impl_failure(exc: BaseException) -> ImplFailed | None:
    """:class:`ImplFailed` for ``exc`` when it was raised in (or below) the code of an
    implementation under test (module docstring); None otherwise. Reads only."""
    if isinstance(exc, ImplFailed):
        return exc
    for e in _chain(exc):
        try:
            found = _from(e)
        except Exception:  # reading the frames must never hide the error being reported
            found = None
        if found is not None:
            return found
    return None
