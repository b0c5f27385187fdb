"""What every layer shares: the two kinds of failure (errors), the run document (run), the metric
registry (metrics), number formats (numbers) and the one way to print to a terminal (terminal)."""
