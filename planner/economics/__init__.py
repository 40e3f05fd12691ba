"""Dollars: rented and owned GPU-hours, cost per token."""
