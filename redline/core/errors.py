"""The two kinds of failure redline reports, each with its exit code."""


class UsageError(Exception):
    """Bad input from the user: a flag, a path, a target, a suite. Exit code 2."""

    exit_code = 2


class RunError(Exception):
    """Something went wrong while measuring: a server that would not start, a crash. Exit code 1."""

    exit_code = 1


class SkipTest(Exception):
    """This machine or server cannot run the test as written (not a failure of the server): the
    run is stored as skipped with the reason."""
