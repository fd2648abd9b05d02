"""Hostile input, surface by surface: each file one command family (issue 32)."""
