"""TLC configurations generated from ``spec/models.json``: one list of models, no hand-kept ``.cfg`` files.

Each model in the manifest names only what differs from the manifest's ``defaults`` (constants, the
specification, invariants, properties, state and action constraints); :func:`render` turns the merged
result into the text TLC reads. ``models/<name>.cfg`` are written by ``txmq spec configs`` and kept in the
repository for users who run TLC by hand; a test fails when a committed file differs from what this
module renders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from txmq.errors import ConfigError

# Keys a model may override, with the TLC keyword each is written under.
_LISTS = (("invariants", "INVARIANTS"), ("properties", "PROPERTIES"), ("constraints", "CONSTRAINTS"),
          ("action_constraints", "ACTION_CONSTRAINTS"))


def merged(defaults: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    """The model's settings: the defaults, with the model's constants merged in and its lists replacing.
    A model of another module than the defaults' (spec/ConsumerGroup.tla's) takes only the specification
    name from them: the defaults' constants and checks are TxMQ's."""
    if model.get("module", defaults.get("module")) != defaults.get("module"):
        defaults = {"specification": defaults.get("specification"), "constants": model.get("constants", {})}
    out = {key: model.get(key, defaults.get(key)) for key in ("module", "specification", *dict(_LISTS))}
    constants = dict(defaults.get("constants", {}))
    unknown = sorted(set(model.get("constants", {})) - set(constants))
    if unknown:
        raise ConfigError(f"model {model.get('name')}: unknown constant(s) {', '.join(unknown)}")
    constants.update(model.get("constants", {}))
    out["constants"] = constants
    return out


def render(name: str, description: str, settings: Mapping[str, Any]) -> str:
    """The ``.cfg`` text: a comment line, the constants, the specification, then each list."""
    lines = [f"\\* {name}: {description}", "\\* Generated from spec/models.json by `txmq spec configs`.",
             "CONSTANTS"]
    for constant, value in settings["constants"].items():
        value = str(value)
        lines.append(f"    {constant} {value}" if value.startswith("<-") else f"    {constant} = {value}")
    lines.append(f"SPECIFICATION {settings['specification']}")
    for key, keyword in _LISTS:
        names = list(settings.get(key) or [])
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ConfigError(f"model {name}: {key} lists {', '.join(duplicated)} twice")
        if names:
            lines.append(keyword)
            lines.extend(f"    {n}" for n in names)
    return "\n".join(lines) + "\n"


def render_model(data: Mapping[str, Any], model: Mapping[str, Any],
                 properties: Callable[[list[str]], list[str]] | None = None) -> str:
    """The ``.cfg`` text of ``model``, one of the manifest ``data``'s models; with ``properties``, the
    temporal properties it checks are those that function keeps of the ones the model lists."""
    settings = merged(data.get("defaults", {}), model)
    if properties is not None:
        settings["properties"] = properties(list(settings.get("properties") or []))
    return render(model["name"], model.get("description", ""), settings)


def write_all(spec_dir: Path, data: Mapping[str, Any]) -> list[Path]:
    """Render every model of the manifest ``data`` into ``spec_dir/models/<name>.cfg``; returns the paths."""
    written = []
    for model in data["models"]:
        path = spec_dir / "models" / f"{model['name']}.cfg"
        text = render_model(data, model)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".cfg.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        written.append(path)
    return written
