"""Tune server settings: the pipeline behind `qbench sweep`, `capacity`, `plan` and `serve --replicas`.
Its rooms, bottom first (each imports only run/ and the rooms before it): knobs/ (the settings tuned, the
grid), verdicts/ (what a run's records say beyond its figures), values/ (what later stages share), ranking/
(results -> the recommendation), servers/ (the servers measured, the app hook), points/ (one point
measured), search/ (which points to measure), then the commands' rooms capacity/, sweep/ and plan/."""
