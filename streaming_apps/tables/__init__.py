"""Typed tables (issue 52): each topic's message bodies decoded into typed columns of a Delta table of its own."""
