"""Exporting trained models as SavedModels that run with only tensorflow and tensorflow-text."""
