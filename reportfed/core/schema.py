"""Config dataclasses as the one schema of their settings: command-line flags, Flower run-config
and wire keys, and docs are generated from the fields (type, default, help), never listed by hand.

A field declared with :func:`setting` carries its help text. Its flag and key are the field name
with dashes (``weight_decay`` -> ``--weight-decay`` / ``weight-decay``). Types handled: ``int``,
``float``, ``str``, ``bool``, ``Literal`` choices, ``tuple[int, ...]`` (written ``"512,256"``);
a field of another type (``node_lr``, a dict) is set per node, not by a flag or key.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from reportfed.core.errors import ConfigError

C = TypeVar("C")
Scalar = int | float | str | bool


def setting(default: Any, help: str, *, architecture: bool = False, private: bool = False) -> Any:
    """A config field with its help text; ``architecture=True`` marks what a model file keeps (the
    shape of the network, apart from how it was trained), ``private=True`` what never leaves a
    node (a path on its disk: :func:`encode` with ``public=True`` leaves it out)."""
    meta = {"help": help, "architecture": architecture, "private": private}
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def dashed(name: str) -> str:
    """The flag / key of a field (``weight_decay`` -> ``weight-decay``)."""
    return name.replace("_", "-")


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected widths like 512,256, got {text!r}") from None


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ConfigError(f"expected true or false, got {value!r}")
        return value.lower() in ("true", "1")
    return bool(value)


def _parser(hint: Any) -> Any:
    """The function turning a flag or key's value into the field's type (``None``: no flag)."""
    if typing.get_origin(hint) is Literal:
        return str
    if hint == tuple[int, ...]:
        return _int_tuple
    if hint is bool:
        return _bool
    return hint if hint in (int, float, str) else None


def fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    """The fields of config class ``cls`` that have a flag and a key, with their resolved types."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if _parser(hints[f.name])]


def architecture_fields(cls: type) -> list[str]:
    """The fields of ``cls`` a model file keeps."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("architecture")]


def architecture(settings: Any) -> dict[str, Any]:
    """The architecture fields of a settings dataclass instance and their values."""
    return {name: getattr(settings, name) for name in architecture_fields(type(settings))}


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Iterable[str] = (),
    required: Iterable[str] = (),
) -> None:
    """A flag per field of ``cls`` (but ``skip``), with its type, default and help; the flags of
    ``required`` fields must be given."""
    skipped, needed = set(skip), set(required)
    for f, hint in fields(cls):
        if f.name in skipped:
            continue
        flag, text = f"--{dashed(f.name)}", f.metadata.get("help", "")
        if f.name in needed:
            parser.add_argument(flag, type=_parser(hint), required=True, help=text)
            continue
        if hint is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=text)  # fmt: skip
        elif typing.get_origin(hint) is Literal:
            parser.add_argument(flag, choices=typing.get_args(hint), default=f.default, help=text)
        elif hint == tuple[int, ...]:  # a string default: argparse converts it with the type
            default = ",".join(map(str, typing.cast(tuple[int, ...], f.default)))
            parser.add_argument(flag, type=_int_tuple, default=default, metavar="W,W", help=text)
        else:
            parser.add_argument(flag, type=hint, default=f.default, help=text)


def from_args(cls: type[C], args: argparse.Namespace, **extra: Any) -> C:
    """The config the flags of :func:`add_flags` give (fields without a flag keep defaults)."""
    given = {f.name: getattr(args, f.name) for f, _ in fields(cls) if hasattr(args, f.name)}
    return cls(**{**given, **extra})


def encode(config: Any, *, public: bool = False) -> dict[str, Scalar]:
    """``config`` as run-config / wire values, keyed by dashed field name; ``public``: without
    the private fields."""
    out: dict[str, Scalar] = {}
    for f, hint in fields(type(config)):
        if public and f.metadata.get("private"):
            continue
        value = getattr(config, f.name)
        out[dashed(f.name)] = ",".join(map(str, value)) if hint == tuple[int, ...] else value
    return out


def scoped(record: Mapping[str, Any], table: str) -> dict[str, Any]:
    """The keys of ``record`` in ``table`` (a run config's ``[table]``, which Flower flattens to
    ``table.key``), without the table's name."""
    prefix = f"{table}."
    return {k.removeprefix(prefix): v for k, v in record.items() if k.startswith(prefix)}


def in_table(table: str, values: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """``values`` as keys of a run config's ``[table]`` (the inverse of :func:`scoped`)."""
    return {f"{table}.{k}": v for k, v in values.items()}


def decode(cls: type[C], record: Mapping[str, Any], **extra: Any) -> C:
    """The config of ``cls`` that ``record`` (a run config or a wire record, dashed keys) gives;
    keys it lacks take the defaults, keys that are no field are ignored."""
    values = {
        f.name: _parser(hint)(record[dashed(f.name)])
        for f, hint in fields(cls)
        if dashed(f.name) in record
    }
    return cls(**{**values, **extra})
