"""One module per CLI command (`run`, `compare`, `calibrate`, `hotspots`, `history`, `build`,
`suites`) and `session`, what the measuring commands share."""
