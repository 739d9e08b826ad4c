"""Steps written once, run sync or async: a generator yields each blocking ``Call`` and
``run_sync``/``run_async`` drive it (an error of a call is raised inside the generator,
at the ``yield``, so the steps handle it where they make the call)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["Call", "Steps", "offload", "on_async_only", "run_async", "run_sync"]

T = TypeVar("T")


class Call:
    """One engine or model call of the steps, runnable sync or async."""

    def __init__(
        self,
        sync: Callable[..., Any],
        async_: Callable[..., Awaitable[Any]],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.sync, self.async_, self.args, self.kwargs = sync, async_, args, kwargs

    def run(self) -> Any:
        return self.sync(*self.args, **self.kwargs)

    async def arun(self) -> Any:
        return await self.async_(*self.args, **self.kwargs)


Steps = Generator[Call, Any, T]


def offload(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """Blocking work (a store read or write): inline on the sync path, in a worker
    thread on the async one, so the event loop never waits on it."""
    return Call(fn, lambda *a, **k: asyncio.to_thread(fn, *a, **k), *args, **kwargs)


def on_async_only(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """Work the sync path does inline later anyway (``fn`` warms it up): nothing on the
    sync path, ``fn`` in a worker thread on the async one."""
    return Call(_nothing, lambda *a, **k: asyncio.to_thread(fn, *a, **k), *args, **kwargs)


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value


def _advance(steps: Steps[Any], result: Any, error: BaseException | None) -> Call | _Done:
    """Give ``steps`` the last call's result (or raise its error at the ``yield``)."""
    try:
        return steps.send(result) if error is None else steps.throw(error)
    except StopIteration as done:
        return _Done(done.value)


def run_sync(steps: Steps[T]) -> T:
    """Drive ``steps`` with blocking calls."""
    result, error = None, None
    while not isinstance(call := _advance(steps, result, error), _Done):
        try:
            result, error = call.run(), None
        except BaseException as e:  # noqa: BLE001 - raised inside the steps, at the yield
            result, error = None, e
    return call.value


async def run_async(steps: Steps[T]) -> T:
    """Drive ``steps`` with awaited calls."""
    result, error = None, None
    while not isinstance(call := _advance(steps, result, error), _Done):
        try:
            result, error = await call.arun(), None
        except BaseException as e:  # noqa: BLE001 - raised inside the steps, at the yield
            result, error = None, e
    return call.value
