"""Mixing cleaned datasets into a training set by target proportions, in curriculum order."""
