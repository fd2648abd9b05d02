"""The config tree: documented, bounded fields; errors that name the source and key path."""

from __future__ import annotations

import types
import typing

import pytest
from pydantic import BaseModel

from laminar.cli import main
from laminar.config import LaminarConfig, dump_config, list_presets, load_config, write_resolved
from laminar.errors import ConfigError


def _walk(model: type[BaseModel], prefix=""):
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field
        ann = field.annotation
        members = (
            typing.get_args(ann)
            if isinstance(ann, types.UnionType) or typing.get_origin(ann) is typing.Union
            else (ann,)
        )
        for m in members:
            if isinstance(m, type) and issubclass(m, BaseModel):
                yield from _walk(m, f"{prefix}{name}.")


def test_every_field_has_a_description_and_numbers_have_bounds():
    for path, field in _walk(LaminarConfig):
        assert field.description and len(field.description) > 10, f"{path} lacks a docstring"
        if field.annotation in (int, float):
            kinds = {type(m).__name__ for m in field.metadata}
            assert kinds & {"Ge", "Gt"} and kinds & {"Le", "Lt"}, f"{path} lacks a bound"


def test_defaults_load_and_round_trip(tmp_path):
    cfg = load_config()
    write_resolved(cfg, tmp_path)
    assert load_config(tmp_path / "config.yaml") == cfg
    assert "cluster:" in dump_config(cfg)


def test_presets_load():
    for name in list_presets():
        load_config(preset=name)


def test_yaml_and_toml_files_and_overrides(tmp_path):
    (tmp_path / "a.yaml").write_text("cluster:\n  gpus: 64\nseed: 3\n")
    (tmp_path / "a.toml").write_text("seed = 3\n[cluster]\ngpus = 64\n")
    y = load_config(tmp_path / "a.yaml")
    t = load_config(tmp_path / "a.toml")
    assert y == t and y.cluster.gpus == 64 and y.seed == 3
    o = load_config(tmp_path / "a.yaml", overrides=["cluster.gpus=128", "repack.enabled=false"])
    assert o.cluster.gpus == 128 and o.repack.enabled is False


def test_union_on_type(tmp_path):
    cfg = load_config(overrides=["workload.source={type: trace, path: x.csv}"])
    assert cfg.workload.source.type == "trace" and cfg.workload.source.path == "x.csv"
    with pytest.raises(ConfigError, match=r"workload\.source"):
        load_config(overrides=["workload.source={type: nope}"])


@pytest.mark.parametrize(
    "text, key",
    [
        ("cluster:\n  gpus: 0\n", "cluster.gpus"),
        ("cluster:\n  gpu: 8\n", "cluster.gpu"),
        ("repack:\n  interval_s: -1\n", "repack.interval_s"),
        ("nonsense: 1\n", "nonsense"),
    ],
)
def test_bad_file_names_file_and_key(tmp_path, text, key):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.source == str(path) and e.value.key_path == key


def test_bad_override_names_the_override(tmp_path):
    (tmp_path / "ok.yaml").write_text("seed: 1\n")
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "ok.yaml", overrides=["cluster.gpus=-3"])
    assert e.value.source == "--set cluster.gpus=-3" and e.value.key_path == "cluster.gpus"
    with pytest.raises(ConfigError, match=r"KEY\.PATH=VALUE"):
        load_config(overrides=["cluster.gpus"])


def test_unparseable_and_wrong_extension(tmp_path):
    (tmp_path / "x.yaml").write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(tmp_path / "x.yaml")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"\.yaml, \.yml or \.toml"):
        load_config(tmp_path / "x.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_cli_bad_config_exits_2_and_names_file_and_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster:\n  gpus: many\n")
    assert main(["config", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "cluster.gpus" in err


def test_cli_help_and_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert "laminar" in capsys.readouterr().out
    assert main([]) == 0
