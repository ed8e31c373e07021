"""Prefect flows and their runner settings: thin wiring of the library (:mod:`pipeline`)."""
