"""What the numbers say: A/B statistics (stats), verdicts per test and metric (comparison), the
near-deterministic rule for counted runs (counted), whether two sides measured the same state
(same_state), history series and change points (history, changepoint)."""
