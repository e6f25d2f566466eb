"""Prefect flows: thin wrappers that run corpusforge's runner with one task per work unit."""
