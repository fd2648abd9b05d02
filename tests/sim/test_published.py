"""benchmarks/published.py: the published rows map onto valid configs; errors and orderings."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

from laminar.config import load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pub():
    path = ROOT / "benchmarks" / "published.py"
    spec = importlib.util.spec_from_file_location("published_bench", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def loaded(pub):
    return pub.load_rows(ROOT / "benchmarks" / "published_rows.yaml")


def test_every_row_has_a_source_and_a_valid_mapping(pub, loaded):
    rows, sources, tables, skipped = loaded
    assert len(rows) >= 20 and len({r.id for r in rows}) == len(rows)
    assert all(r.source in sources and r.published_s > 0 for r in rows)
    assert all(t.get("assumed") for t in tables) and all(s["why"] for s in skipped)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in rows:
            cfg = load_config(overrides=[f"{k}={pub._value(v)}" for k, v in r.overrides.items()])
            assert cfg.sim.systems == [r.system] and cfg.cluster.gpus == r.gpus


def test_orderings_are_the_published_ones(pub):
    def row(i, group, system, published, simulated):
        r = pub.Row(i, "t", "s", group, system, 8, published, {})
        r.simulated_s = simulated
        return r

    rows = [row("a", "g", "verl", 100, 50), row("b", "g", "partial", 60, 70),
            row("c", "g", "stream", 98, 10), row("d", "h", "verl", 10, 1)]  # fmt: skip
    found = {(f.id, s.id): ok for f, s, ok, _ in pub.orderings(rows, [])}
    # a-c are within 5%: not an ordering; d is in another group.
    assert found == {("b", "a"): False, ("b", "c"): False}


def test_a_row_is_simulated_and_rendered(pub, loaded, tmp_path):
    rows, sources, tables, skipped = loaded
    row = next(r for r in rows if r.id == "nemo4-llama8-off-16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pub.run_row(row)
    assert not row.error and row.simulated_s > 0
    assert sum(row.stages.values()) == pytest.approx(row.simulated_s, rel=1e-6)
    text = pub.render([row], sources, tables, skipped, 0.0, [{"title": "T", "text": "x"}])
    assert f"| {row.id} | {row.system} | 16 | 74.6 | {row.simulated_s:.1f} |" in text
    assert "## Why rows miss" in text and "median |simulated/published - 1|" in text


def test_misses_and_wrong_orderings_name_their_finding(pub):
    def row(i, group, published, simulated):
        r = pub.Row(i, "t", "s", group, "verl" if i.endswith("on") else "one-step", 8,
                    published, {})  # fmt: skip
        r.simulated_s, r.stages = simulated, {k: 0.0 for k in pub.STAGES}
        return r

    rows = [row("x-on", "g", 100, 50), row("x-off", "g", 60, 70), row("y-on", "h", 10, 10.5)]
    findings = [{"title": "X", "text": "why x", "explains": ["x-*"]},
                {"title": "None", "text": "n", "explains": []}]  # fmt: skip
    why = pub.attribute(rows, findings)
    assert why == {"x-on": [1], "x-off": [1], "y-on": []}
    text = pub.render(rows, {}, [], [], 0.0, findings)
    assert "| x-on | 0.50 | under | F1 |" in text and "| x-off | 1.17 |" not in text
    assert "explains: **0**" in text and "**F1. X.** why x" in text
    # the wrong ordering (x-off published faster, simulated slower) is explained by F1
    assert "| x-off | x-on | sync vs async | 0.60x | 1.40x | **no** | F1 |" in text
    # without the finding, the row and the ordering are listed as unexplained
    text = pub.render(rows, {}, [], [], 0.0, findings[1:])
    assert "**2** (x-on, x-off vs x-on)" in text
    assert "| x-on | 0.50 | under | **not explained** |" in text


def test_every_shipped_miss_is_explained_and_every_pattern_matches(pub, loaded):
    rows, _, tables, _ = loaded
    findings = pub.load_file(ROOT / "benchmarks" / "published_rows.yaml")["findings"]
    ids = [r.id for r in rows]
    for f in findings:
        for pattern in f.get("explains", []):
            assert any(pub.fnmatch.fnmatchcase(i, pattern) for i in ids), (f["title"], pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in rows:
            pub.run_row(r)
    why = pub.attribute(rows, findings)
    misses = [r for r in rows if abs(r.ratio - 1) > pub.GOAL]
    assert pub.unexplained(misses, pub.orderings(rows, tables), why) == []


def test_published_stages_are_set_beside_the_simulated_ones(pub):
    r = pub.Row("v-on", "t", "s", "g", "verl", 8, 100.0, {},
                published_stages={"gen_s": 60.0, "update_s": 40.0})  # fmt: skip
    r.simulated_s = 150.0
    r.stages = {k: 0.0 for k in pub.STAGES} | {"gen_s": 70.0, "update_s": 80.0}
    bare = pub.Row("w-on", "t", "s", "g", "verl", 8, 100.0, {})
    bare.simulated_s, bare.stages = 100.0, {k: 0.0 for k in pub.STAGES}
    text = pub.render([r, bare], {}, [], [], 0.0)
    assert "## Stages the sources print" in text
    assert "| v-on | 1.50 | generation | 60.0 | 70.0 | 1.17 | +10.0 |" in text
    # the update's gap (+40 s) is the larger: bolded as where the miss sits
    assert "| v-on | 1.50 | **update** | 40.0 | 80.0 | 2.00 | +40.0 |" in text
    assert "| w-on | 1.00 | generation" not in text  # its source prints no stages
    assert "## Stages" not in pub.render([bare], {}, [], [], 0.0)


def test_shipped_stages_are_known_stages_and_a_bad_one_names_its_row(pub, loaded, tmp_path):
    rows, *_ = loaded
    staged = [r for r in rows if r.published_stages]
    assert staged and all(set(r.published_stages) <= set(pub.STAGES) for r in staged)
    data = pub.load_file(ROOT / "benchmarks" / "published_rows.yaml")
    for bad, what in (({"generation": 3.0}, "stages.generation: not a stage"),
                      ({"gen_s": -1}, "stages.gen_s: -1 is not seconds"),
                      ([1, 2], "stages: a mapping")):  # fmt: skip
        data["tables"][0]["rows"][0]["stages"] = bad
        path = tmp_path / "rows.yaml"
        path.write_text(pub.yaml.safe_dump(data))
        with pytest.raises(ValueError, match="row verl-7b-sync-32: " + what):
            pub.load_rows(path)


def test_stages_adding_up_past_the_step_are_pointed_out(pub):
    r = pub.Row("v-on", "t", "s", "g", "verl", 8, 100.0, {},
                published_stages={"gen_s": 30.0, "update_s": 80.0})  # fmt: skip
    r.simulated_s, r.stages = 100.0, {k: 10.0 for k in pub.STAGES}
    text = pub.render([r], {}, [], [], 0.0)
    assert "more than the printed step" in text and "v-on (110.0 s of stages, a 100 s step)" in text
    r.published_stages = {"gen_s": 30.0, "update_s": 60.0}
    assert "more than the printed step" not in pub.render([r], {}, [], [], 0.0)


def test_shipped_syncs_load_and_one_is_simulated_and_rendered(pub):
    syncs, block = pub.load_syncs(ROOT / "benchmarks" / "published_rows.yaml")
    assert len(syncs) >= 3 and len({x.id for x in syncs}) == len(syncs)
    assert block["system"] and block["about"] and block["assumed"]
    assert all(x.bucketed_s > 0 and x.bucketed_s <= x.per_tensor_s for x in syncs)
    dense = next(x for x in syncs if x.id == "verl-sync-7b-4-4")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pub.run_sync(dense)
    assert not dense.error and dense.simulated_s > 0
    text = pub.render([], {}, [], [], 0.0, (), [dense], block)
    assert "## Weight syncs the sources print" in text
    assert f"| {dense.simulated_s:.3g} | {dense.simulated_s / 0.02:.2f} |" in text
    assert "## Weight syncs" not in pub.render([], {}, [], [], 0.0)


def test_a_malformed_sync_names_its_entry_and_key(pub, tmp_path):
    data = pub.load_file(ROOT / "benchmarks" / "published_rows.yaml")
    for bad in ("fast", -1.0, True):
        data["syncs"]["rows"][1]["bucketed_s"] = bad
        path = tmp_path / "rows.yaml"
        path.write_text(pub.yaml.safe_dump(data))
        with pytest.raises(ValueError, match=r"rows.yaml: syncs row verl-sync-30b-16-16: "
                                             r"bucketed_s: .* is not seconds"):  # fmt: skip
            pub.load_syncs(path)


def test_a_refused_sync_job_is_shown_refused(pub):
    bad = pub.Sync("x", "1:1", 1.0, float("nan"), {"cluster.gpus": 8,
                   "model.name": "qwen3-30b-a3b", "model.rollout_ep": 3})  # fmt: skip
    pub.run_sync(bad)
    assert bad.error
    text = pub.render([], {}, [], [], 0.0, (), [bad], {})
    assert "| x | 1:1 | 1 | - | refused: " in text


def test_a_row_is_the_mean_of_its_seeds(pub, loaded):
    rows, *_ = loaded
    row = next(r for r in rows if r.id == "nemo4-llama8-off-16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        each = [pub._simulated({**row.overrides, "seed": seed})[0] for seed in (0, 1)]
        pub.run_row(row, seeds=2)
    steps = [float(s["step_time_s_mean"]) for s in each]
    assert steps[0] != steps[1]  # the seed moves a row
    assert row.simulated_s == pytest.approx(sum(steps) / 2)
    for k in pub.STAGES:
        assert row.stages[k] == pytest.approx(sum(float(s[f"{k}_mean"]) for s in each) / 2)


def test_the_validation_figure_draws_every_row(pub, tmp_path):
    from laminar.plotting import save_figure
    from laminar.plotting.validation import validation_figure

    def row(i, table, system, published, simulated):
        r = pub.Row(i, table, "s", "g", system, 8, published, {})
        r.simulated_s = simulated
        return r

    rows = [row("a", "t1", "verl", 100, 90), row("b", "t1", "partial", 60, 90),
            row("c", "t2", "verl", 10, 4), row("d", "t2", "stream", 20, 21)]  # fmt: skip
    bad = row("e", "t2", "verl", 30, float("nan"))
    bad.error = "refused"
    frame = pub.rows_frame([*rows, bad])
    assert list(frame["id"]) == ["a", "b", "c", "d"]  # a refused row is not drawn
    fig = validation_figure(frame)
    scatter, bars = fig.axes[:2]
    points = [c.get_offsets() for c in scatter.collections[1:]]  # after the shaded band
    drawn = sorted(x for p in points for x, _ in p)
    assert drawn == [10, 20, 60, 100]
    # the bars are the rows' ratios, sorted
    heights = [p.get_height() + p.get_y() for p in bars.containers[0].patches]
    assert heights == pytest.approx([0.4, 0.9, 1.05, 1.5])
    assert "median |sim/pub - 1| 30.0%" in fig.get_suptitle()
    assert save_figure(fig, tmp_path / "v.png").stat().st_size > 0
    with pytest.raises(ValueError, match="simulated_s"):
        validation_figure(frame.drop(columns=["simulated_s"]))
