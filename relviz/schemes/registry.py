"""The registry of position schemes: every module of :mod:`relviz.schemes` is imported, and every
:class:`~relviz.schemes.base.Scheme` subclass it defines with a ``name`` is registered.

It lives here, not in the package's ``__init__``: scheme modules import ``relviz.schemes.base``,
and Python holds a module's lock while it loads the module's parent package, so a package body that
imported every scheme module would close an import cycle.
"""
from __future__ import annotations

import relviz.schemes as _package
from relviz._registry import discover_subclasses
from relviz.schemes.base import Param, Scheme

__all__ = ["REGISTRY", "get_scheme", "scheme_names", "all_params", "param_owner"]


def _discover() -> dict[str, type[Scheme]]:
    found = discover_subclasses(_package, Scheme, registry="registry", what="scheme")
    owners: dict[str, str] = {}
    for scheme in found.values():
        for param in scheme.params:
            if param.name in owners:
                raise RuntimeError(f"parameter {param.name!r} is declared by schemes {owners[param.name]!r} and "
                                   f"{scheme.name!r}: scheme parameter names must be unique")
            owners[param.name] = scheme.name
    return found


#: scheme name -> its class, in listing order.
REGISTRY: dict[str, type[Scheme]] = _discover()


def scheme_names() -> list[str]:
    return list(REGISTRY)


def get_scheme(name: object) -> type[Scheme]:
    """The scheme class called ``name``, or ValueError listing the known ones."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise ValueError(f"unknown scheme {name!r}; known schemes: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def all_params() -> list[Param]:
    """Every scheme's parameters, in listing order (each name belongs to one scheme)."""
    return [param for scheme in REGISTRY.values() for param in scheme.params]


def param_owner(param_name: str) -> str:
    """The scheme that declares a parameter."""
    return next(s.name for s in REGISTRY.values() if any(p.name == param_name for p in s.params))
