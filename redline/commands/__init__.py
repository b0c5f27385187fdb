"""One module per command of `redline` (the list and its order: redline.cli.COMMANDS). Each owns
its parser (`add_parser(subparsers)`, which sets `func`) and its function (`NAME_command(args)`).
What several share: `arguments` (parser class, common arguments, --measure defaults),
`argtypes` (argument values refused before anything starts), `session` (run, compare and
calibrate: checks, run settings, the session, the exit status)."""
