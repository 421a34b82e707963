"""Streamlit apps: the compliance review queue and the experiment dashboard (`streamlit run dashboards/app.py`)."""
