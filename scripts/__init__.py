"""The repository's scripts; a package so that `python3 -m scripts.coordinator_templates` works."""
