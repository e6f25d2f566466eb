"""What every config in the project shares: pipeline, mix, train and compress configs alike.

* ``StrictModel``: a pydantic model with unknown keys forbidden.
* ``read_yaml``: a YAML (or JSON) file as a mapping, with ``--set`` overrides applied.
* ``parse_set``: the one ``--set KEY=VALUE`` grammar: a dotted path whose parts are keys or list
  indices (``stages.1.threshold=0.7``, ``quantize.methods=[nf4]``), the value read as YAML.
* ``validate``: a mapping into a model; any problem is a ``ConfigError`` whose message names the
  field by its path (``optim.lr: Input should be a valid number``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from corpusforge.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Unknown keys are errors (a misspelt option must never be silently ignored)."""
    model_config = ConfigDict(extra="forbid")


def format_errors(exc: ValidationError, prefix: str = "") -> str:
    """pydantic's errors as ``field.path: message``, joined by ``; ``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(err["loc"]))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check its spelling)"
        if msg.startswith("Value error, "):               # a validator's own message already says it
            msg = msg.removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(lines)


def validate(model: type[M], raw, source: str = "config") -> M:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping, got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {format_errors(exc)}") from None


def parse_set(values: list[str] | None) -> dict:
    """``["a.b=1", "c.0=x"]`` -> ``{"a.b": 1, "c.0": "x"}`` (values parsed as YAML)."""
    overrides = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE (for example output.path=out/x)")
        try:
            overrides[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: the value is not valid YAML: {exc}") from None
    return overrides


def apply_overrides(raw, overrides: dict | None, source: str) -> None:
    """Set ``{"stages.0.form": "NFC", ...}`` in a nested config mapping, in place: keys of a
    mapping are created as needed, list indices must exist."""
    if not overrides:
        return
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping, got {type(raw).__name__}")
    for dotted, value in overrides.items():
        node = raw
        *parents, leaf = dotted.split(".")
        try:
            for p in parents:
                node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
                if node is None or not isinstance(node, (dict, list)):
                    raise TypeError
            node[int(leaf) if isinstance(node, list) else leaf] = value
        except (IndexError, ValueError, TypeError, AttributeError):
            raise ConfigError(f"--set {dotted}: no such place in {source}") from None


def read_yaml(path: str | Path | None, overrides: dict | list[str] | None = None, what: str = "config") -> dict:
    """A YAML file (none: an empty mapping) with ``--set`` overrides (a parsed dict, or the raw
    ``KEY=VALUE`` strings) applied."""
    raw: object = {}
    source = str(path) if path else f"the {what} given by --set"
    if path:
        try:
            raw = yaml.safe_load(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"{what} file not found: {path}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        raw = {} if raw is None else raw
    if isinstance(overrides, list):
        overrides = parse_set(overrides)
    apply_overrides(raw, overrides, source)
    return raw
