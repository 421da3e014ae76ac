"""Calls to Engram written once for the sync and the async client: a plan is a generator that
yields ``Call``s and receives each one's result (or has its EngramAPIError thrown in); ``run``
drives it with an EngramClient, ``arun`` with an AsyncEngramClient."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engram_client.client import EngramAPIError

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    method: str  # a method of both clients
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Plan = Generator[Call, Any, T]


def run(plan: Plan[T], client: Any) -> T:
    result: Any = None
    error: EngramAPIError | None = None
    while True:
        try:
            call = plan.throw(error) if error is not None else plan.send(result)
        except StopIteration as stop:
            return stop.value
        result, error = None, None
        try:
            result = getattr(client, call.method)(*call.args, **call.kwargs)
        except EngramAPIError as exc:
            error = exc


async def arun(plan: Plan[T], client: Any) -> T:
    result: Any = None
    error: EngramAPIError | None = None
    while True:
        try:
            call = plan.throw(error) if error is not None else plan.send(result)
        except StopIteration as stop:
            return stop.value
        result, error = None, None
        try:
            result = await getattr(client, call.method)(*call.args, **call.kwargs)
        except EngramAPIError as exc:
            error = exc
