"""Streamlit UI modules over the pure planner: inputs, figures, charts, links, comparison, exports."""
