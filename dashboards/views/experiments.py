"""The experiment dashboard: is the advisor learning, and at what cost? (`mlflow ui` shows raw runs.)"""

from __future__ import annotations

import streamlit as st

from dashboards.experiments import charts
from dashboards.experiments.data import ExperimentStore, RunInfo
from dashboards.experiments.tables import (
    HEADLINE,
    ablation_frame,
    axis_of,
    consultation_rows,
    consultations_behind,
    cost_frame,
    curve_frame,
    curve_metrics,
    decided_by_frame,
    runs_table,
    violations_frame,
)
from dashboards.state import current_settings
from environments.consultation import ConsultationRecord

CACHE_SECONDS = 30  # runs move on while the page is open; a short cache keeps reruns quick


@st.cache_data(ttl=CACHE_SECONDS, show_spinner=False)
def load_runs(tracking_uri: str, experiment: str) -> list[RunInfo]:
    return ExperimentStore(tracking_uri, experiment).runs()


@st.cache_data(ttl=CACHE_SECONDS, show_spinner=False)
def load_history(tracking_uri: str, experiment: str, run_id: str, metric: str) -> list[tuple[int, float]]:
    return ExperimentStore(tracking_uri, experiment).history(run_id, metric)


@st.cache_data(ttl=CACHE_SECONDS, show_spinner="Loading transcripts...")
def load_transcripts(tracking_uri: str, experiment: str, run: RunInfo) -> list[ConsultationRecord]:
    return ExperimentStore(tracking_uri, experiment).transcripts(run)


def follow_selection(event, labels: set[str]) -> None:
    """Point the drill-down at the curve point the user clicked (before its widgets are drawn)."""
    points = (event or {}).get("selection", {}).get(charts.POINT) or []
    if not points:
        return
    point = points[0]
    key = (point.get("run"), point.get("step"))
    if key == st.session_state.get("curve_last") or point.get("run") not in labels:
        return
    st.session_state["curve_last"] = key
    st.session_state["drill_run"] = point["run"]
    st.session_state["drill_step"] = int(point["step"])


def transcript(record: ConsultationRecord) -> None:
    st.caption(
        f"{record.id} · goal {record.goal} · customer {record.customer_id} · "
        f"{record.started_at:%Y-%m-%d %H:%M} to {record.ended_at:%H:%M} virtual time · ended by {record.ended_by}"
    )
    for turn in record.turns:
        with st.chat_message("user" if turn.speaker == "customer" else "assistant"):
            st.markdown(turn.text)
            if turn.speaker == "advisor":
                notes = [
                    "first pass compliant"
                    if turn.first_pass_compliant
                    else f"first pass broke {', '.join(turn.first_pass_violations) or 'a rule'}",
                    f"{turn.refinements} refinement(s)",
                    f"decided by {turn.decided_by}",
                ]
                if turn.escalated:
                    reasons = "; ".join(turn.escalation_reasons)
                    notes.append(f"escalated ({reasons})" if reasons else "escalated")
                if turn.used_rule_ids or turn.used_case_ids:
                    notes.append(
                        f"cited {len(turn.used_case_ids)} case(s), {len(turn.used_rule_ids)} rule(s)"
                    )
                st.caption(" · ".join(notes))


def drill_down(settings, chosen: list[RunInfo], metric: str, window: int) -> None:
    st.subheader("Drill down: the consultations behind a point")
    by_label = {run.label: run for run in chosen}
    left, right = st.columns(2)
    label = left.selectbox("Run", list(by_label), key="drill_run")
    step = right.number_input(
        f"{axis_of(metric)} (click a point on the curve)", min_value=0, step=1, key="drill_step"
    )
    run = by_label[label]
    records = load_transcripts(settings.tracking_uri, settings.experiment, run)
    if not records:
        st.caption("This run has no transcripts to show.")
        return
    behind = consultations_behind(records, metric, int(step), window, run.consultations_per_day)
    if not behind:
        st.caption(f"No consultation of this run is behind {axis_of(metric)} {int(step)}.")
        return
    st.dataframe(consultation_rows(behind), hide_index=True, width="stretch")
    ids = {r.id: r for r in behind}
    chosen_id = st.selectbox("Consultation", list(ids), key="drill_consultation")
    transcript(ids[chosen_id])


def main() -> None:
    settings = current_settings()
    st.title("Is it learning, and at what cost?")
    st.caption(
        f"Runs of experiment `{settings.experiment}` in `{settings.tracking_uri}`. For raw runs: "
        f"`mlflow ui --backend-store-uri {settings.tracking_uri}`."
    )
    runs = load_runs(settings.tracking_uri, settings.experiment)
    if not runs:
        st.info("No training run yet. Start one with `python -m environments.train` and reload.")
        return
    st.dataframe(runs_table(runs), hide_index=True, width="stretch")

    labels = [run.label for run in runs]
    finished = [run.label for run in runs if run.status == "FINISHED"]
    picked = st.multiselect("Runs to compare", labels, default=(finished or labels)[:6], key="runs_chosen")
    chosen = [run for run in runs if run.label in picked]
    if not chosen:
        st.caption("Choose at least one run.")
        return
    if any(run.scripted for run in chosen):
        st.warning("Some chosen runs used the scripted offline stand-in model, not a real LLM.")

    st.subheader("Learning curves")
    metrics = curve_metrics(chosen)
    if not metrics:
        st.caption("These runs logged no per-consultation or per-day metrics.")
        return
    left, right = st.columns([2, 1])
    metric = left.selectbox("Metric", metrics, key="curve_metric")
    window = right.slider("Smoothing window", 1, 20, 5, key="curve_window")
    histories = {
        run.label: load_history(settings.tracking_uri, settings.experiment, run.run_id, metric)
        for run in chosen
    }
    frame = curve_frame(histories, window if axis_of(metric) == "consultation" else 1)
    event = st.altair_chart(
        charts.learning_curve(frame, metric, axis_of(metric)), on_select="rerun", key="curve", width="stretch"
    )
    follow_selection(event, set(picked))

    violations, costs, ablations = st.tabs(["Violations by code", "Cost and tokens", "Ablations"])
    with violations:
        frame = violations_frame(chosen)
        if frame.empty:
            st.caption("No first-pass violation in these runs.")
        else:
            measure = st.radio(
                "Show", ["count", "per consultation"], horizontal=True, key="violations_measure"
            )
            st.altair_chart(charts.violations_chart(frame, measure), width="stretch")
    with costs:
        frame = cost_frame(chosen)
        a, b = st.columns(2)
        a.altair_chart(charts.per_run_bars(frame, "tokens / consultation"), width="stretch")
        b.altair_chart(charts.per_run_bars(frame, "cost USD / consultation"), width="stretch")
        st.markdown("**Which stage decided each advisor turn**")
        st.dataframe(
            decided_by_frame(chosen).pivot_table(index="run", columns="stage", values="turns", fill_value=0),
            width="stretch",
        )
    with ablations:
        frame = ablation_frame(chosen)
        if frame.empty:
            st.caption("No finished run among those chosen.")
        else:
            st.dataframe(frame, hide_index=True, width="stretch")
            st.altair_chart(charts.ablation_chart(frame, list(HEADLINE)), width="stretch")

    drill_down(settings, chosen, metric, window if axis_of(metric) == "consultation" else 1)


main()
