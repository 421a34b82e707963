"""Altair charts for the experiment page; the learning curve's points are selectable for drill-down."""

from __future__ import annotations

import altair as alt
import pandas as pd

POINT = "point"  # the learning curve's selection parameter: fields run and step


def learning_curve(frame: pd.DataFrame, metric: str, axis: str) -> alt.LayerChart:
    pick = alt.selection_point(name=POINT, fields=["run", "step"], on="click", nearest=True)
    base = alt.Chart(frame).encode(
        x=alt.X("step:Q", title=axis),
        color=alt.Color("run:N", title="run"),
    )
    line = base.mark_line().encode(y=alt.Y("smoothed:Q", title=f"{metric} (rolling mean)"))
    points = (
        base.mark_circle(size=60)
        .encode(
            y="value:Q",
            opacity=alt.condition(pick, alt.value(0.9), alt.value(0.25)),
            tooltip=[
                "run",
                "step",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("smoothed:Q", format=".3f"),
            ],
        )
        .add_params(pick)
    )
    return alt.layer(line, points).properties(height=320)


def violations_chart(frame: pd.DataFrame, measure: str) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("code:N", title=None, axis=alt.Axis(labelLimit=320)),
            yOffset="run:N",
            x=alt.X(f"{measure}:Q", title=f"first-pass violations ({measure})"),
            color=alt.Color("run:N", title="run"),
            tooltip=["run", "code", "count", alt.Tooltip("per consultation:Q", format=".2f")],
        )
        .properties(height=alt.Step(12))
    )


def per_run_bars(frame: pd.DataFrame, measure: str) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X(f"{measure}:Q", title=measure),
            y=alt.Y("run:N", title=None, axis=alt.Axis(labelLimit=320)),
            color=alt.Color("run:N", legend=None),
            tooltip=["run", alt.Tooltip(f"{measure}:Q", format=",.3f")],
        )
    )


def ablation_chart(frame: pd.DataFrame, metrics: list[str]) -> alt.Chart:
    long = frame.melt(id_vars=["ablation", "runs"], value_vars=metrics, var_name="metric", value_name="mean")
    return (
        alt.Chart(long.dropna(subset=["mean"]))
        .mark_bar()
        .encode(
            y=alt.Y("metric:N", title=None, axis=alt.Axis(labelLimit=320)),
            yOffset="ablation:N",
            x=alt.X("mean:Q", title="mean over finished runs", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("ablation:N", title="advisor used"),
            tooltip=["ablation", "runs", "metric", alt.Tooltip("mean:Q", format=".3f")],
        )
        .properties(height=alt.Step(14))
    )
