"""`redline bisect`: the search (search), how a bisection measures (measure), simulated counts for
fast tests (simulation)."""
