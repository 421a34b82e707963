"""Learning curves read back from a real MLflow tracking store (SQLite)."""

from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

from environments.curves import main, read_curves, rolling, slope, summarise


@pytest.fixture
def run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("curves", artifact_location=str(tmp_path / "artifacts"))
    run_id = client.create_run(experiment).info.run_id
    # Twelve days rising by 0.02 a day, cases growing; the run's closing totals at step 96 (its
    # number of consultations), which is not a day.
    for day in range(12):
        client.log_metric(run_id, "day.first_pass_compliance_rate", 0.5 + 0.02 * day, step=day)
        client.log_metric(run_id, "day.escalation_rate", 0.2, step=day)
        client.log_metric(run_id, "cases_total", 100 + day, step=day)
    client.log_metric(run_id, "cases_total", 111, step=96)
    # A resumed run logged day 3 again; the later value wins.
    client.log_metric(run_id, "day.first_pass_compliance_rate", 0.56, step=3, timestamp=10**13)
    client.set_terminated(run_id)
    return uri, client, run_id


def test_curves_keep_days_only_and_the_last_value_per_day(run):
    _uri, client, run_id = run
    curves = read_curves(client, run_id)
    assert [d for d, _ in curves["cases_total"].points] == list(range(12))
    assert dict(curves["day.first_pass_compliance_rate"].points)[3] == pytest.approx(0.56)
    assert "day.satisfaction" not in curves  # not logged: not drawn


def test_summary_compares_first_and_last_days(run):
    _uri, client, run_id = run
    summary = summarise(run_id, read_curves(client, run_id), window=3)
    assert summary.days == 12
    assert summary.first_days_mean == pytest.approx((0.50 + 0.52 + 0.54) / 3, abs=1e-4)
    assert summary.last_days_mean == pytest.approx((0.68 + 0.70 + 0.72) / 3, abs=1e-4)
    assert summary.slope_per_day == pytest.approx(0.02, abs=1e-3)
    assert summary.cases_total == 111


def test_command_writes_the_plot_and_prints_json(run, tmp_path, capsys):
    uri, _client, run_id = run
    out = tmp_path / "curves.png"
    assert main([run_id, "--tracking-uri", uri, "--plot", str(out), "--window", "2"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["run_id"] == run_id and last["window"] == 2


def test_command_refuses_a_run_without_day_metrics(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("empty")).info.run_id
    assert main([run_id, "--tracking-uri", uri]) == 2
    assert "no day.first_pass_compliance_rate history" in capsys.readouterr().err


def test_slope_and_rolling_mean():
    assert slope([(0, 1.0), (1, 3.0), (2, 5.0)]) == pytest.approx(2.0)
    assert slope([(0, 1.0)]) == 0.0
    assert rolling([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
