"""``laminar bench relay``: runs end to end on a tiny configuration and prints the figures."""

from __future__ import annotations

import json

import pytest

from laminar.cli import main
from laminar.policy.relay import broadcast_time


@pytest.mark.slow
def test_bench_relay_prints_the_figures(capsys, tmp_path):
    out = tmp_path / "relay.json"
    args = ["bench", "relay", "--relays", "3", "--mbytes", "2", "--transport", "tcp"]
    assert main([*args, "--repeats", "1", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == result
    for key in ("p", "nbytes", "chunks", "measured_s", "model_s", "actor_stall_s", "naive_s"):
        assert key in result
    assert result["p"] == 3 and result["nbytes"] == 2 << 20 and result["chunks"] >= 1
    assert result["model_s"] == pytest.approx(
        broadcast_time(3, result["chunks"], 2 << 20, result["alpha_s"], result["beta_s_per_byte"])
    )
    assert 0 < result["actor_stall_s"] < 5 and 0 < result["measured_s"] < 30
    assert result["naive_s"] > 0 and result["alpha_s"] > 0 and result["beta_s_per_byte"] > 0


def test_bench_relay_rejects_a_chain_of_one(capsys):
    with pytest.raises(SystemExit) as exit_info:  # argparse refuses the number itself
        main(["bench", "relay", "--relays", "1", "--mbytes", "2"])
    assert exit_info.value.code == 2
    assert "--relays" in capsys.readouterr().err
