"""One converter per study, from the old bench/results files to migrated records (see studies.migrate)."""
