"""The registry of position schemes: every module of :mod:`relviz.schemes` is imported, and every
:class:`~relviz.schemes.base.Scheme` subclass it defines with a ``name`` is registered.

A scheme is the toy model's holder of one concept's learned parameters: its ``concept`` is a class of
:data:`relviz.mechanisms.registry.MECHANISMS`, the one registry of concepts (the plan reader, the toy model and
the pages all draw a concept from there), and its forward is that mechanism's (:func:`check_scheme`).

It lives here, not in the package's ``__init__``: scheme modules import ``relviz.schemes.base``,
and Python holds a module's lock while it loads the module's parent package, so a package body that
imported every scheme module would close an import cycle.
"""
from __future__ import annotations

import relviz.schemes as _package
from relviz._registry import discover_subclasses
from relviz.mechanisms.base import Mechanism
from relviz.schemes.base import Param, Scheme

__all__ = ["REGISTRY", "FORWARD", "check_scheme", "get_scheme", "scheme_names", "all_params", "param_owner"]


#: the model's calls into a scheme, each its mechanism's (Scheme.embed / prepare / attend), never overridden
FORWARD = ("embed", "prepare", "attend")


def check_scheme(scheme: type[Scheme]) -> None:
    """RuntimeError unless ``scheme`` computes its position only through the mechanism it hands out: it overrides
    none of :data:`FORWARD`, and its ``concept`` is a Mechanism class."""
    own = [hook for hook in FORWARD if hook in vars(scheme)]
    if own:
        raise RuntimeError(f"scheme {scheme.name!r} overrides {', '.join(own)}: a scheme's forward is its mechanism's, "
                           "so each concept has one implementation; hand it out from mechanism(layer) "
                           f"({scheme.__module__})")
    if scheme.training_defaults.get("model", {}).get("n_layers") and not scheme.shape_note:
        raise RuntimeError(f"scheme {scheme.name!r} trains with other layers than the common shape "
                           "(training_defaults['model']): say why in shape_note")
    if not (isinstance(scheme.concept, type) and issubclass(scheme.concept, Mechanism)):
        raise RuntimeError(f"scheme {scheme.name!r}: concept must be a Mechanism class (relviz.mechanisms); "
                           f"got {scheme.concept!r}")


def _discover() -> dict[str, type[Scheme]]:
    found = discover_subclasses(_package, Scheme, registry="registry", what="scheme")
    owners: dict[str, str] = {}
    for scheme in found.values():
        check_scheme(scheme)
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
