"""A collaborator's method offered on the object that holds it: `MemoryPack.search` is
`Ranking.search` called on the pack's ranking, with its own signature, types and docstring, so
the pack's public API is declared once, where it is implemented."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

P = ParamSpec("P")
R = TypeVar("R")


class delegated(Generic[P, R]):  # lower case: declared in a class body as `property` is
    """`name = delegated("_part", Part.name)` in a class body: `obj.name(...)` calls
    `obj._part.name(...)`. On the class it reads as the method (`help`, `inspect.signature`)."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.method = method
        # its name, docstring and `__wrapped__` (whence `inspect.signature` reads its parameters)
        functools.update_wrapper(cast(Any, self), method)

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.method.__name__:  # `search = delegated(…, Ranking.select)` is a slip
            raise TypeError(f"{owner.__name__}.{name} delegates to {self.method.__qualname__}")

    def __call__(self, holder: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        """Called on the class, as a method is: `MemoryPack.search(pack, "refund")`."""
        return self.__get__(holder)(*args, **kwargs)

    @overload
    def __get__(self, holder: None, owner: type | None = None) -> delegated[P, R]: ...
    @overload
    def __get__(self, holder: object, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(self, holder: object | None, owner: type | None = None) -> Any:
        if holder is None:
            return self
        return getattr(getattr(holder, self.part), self.method.__name__)
