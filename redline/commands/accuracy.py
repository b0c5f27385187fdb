"""`redline accuracy`: redline's own accuracy on known upstream performance changes (issue #32):
every entry of the corpus built and compared (or its range bisected) through redline itself,
resumable, and the table of what was found (docs/accuracy.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from redline.accuracy import plan as planning
from redline.accuracy import runner, table
from redline.accuracy.corpus import Corpus, check_catalogue, check_schema, load_corpus, refuse
from redline.accuracy.history import Repository, check_history
from redline.accuracy.scoring import FAILED, score
from redline.commands.argtypes import duration, positive_int, regex, store_path, whole_seconds
from redline.commands.arguments import add_scale_argument, add_window_argument
from redline.commands.session import check_outputs
from redline.core import terminal
from redline.core.errors import UsageError
from redline.store.results import Store, inspect_store_file

DEFAULT_CORPUS = Path("accuracy/corpus.yaml")
DEFAULT_CATALOGUE = Path("../shared/upstream-suites/test-suites")
EXIT_OK, EXIT_FAILED = 0, 1


def add_parser(commands) -> None:
    parser = commands.add_parser("accuracy", help="measure redline on the corpus of known upstream performance changes "
                                                  "(resumable) and write the accuracy table",
                                 epilog="exit status: 0 every selected entry measured, refused here or measured before; "
                                        "1 a measurement failed (it is tried again next time); 2 bad input (a bad "
                                        "corpus entry: FILE:LINE NAME: what); 130 interrupted")
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS,
                        help=f"the corpus YAML (default {DEFAULT_CORPUS})")
    parser.add_argument("--repository", type=Path, metavar="PATH",
                        help="a clone of the server's repository holding every commit of the corpus")
    parser.add_argument("--catalogue", type=Path, default=DEFAULT_CATALOGUE, metavar="DIR",
                        help=f"the upstream suite catalogue: <name>.yml per suite (default {DEFAULT_CATALOGUE})")
    parser.add_argument("--store", type=store_path, default=Path("accuracy.db"), metavar="PATH",
                        help="the store every measurement goes to and resumes from (default ./accuracy.db)")
    parser.add_argument("--only", type=regex, metavar="REGEX", help="measure only the entries whose name matches")
    parser.add_argument("--measure", choices=planning.MEASURE_CHOICES, default=planning.AUTO,
                        help="auto (default): counted under callgrind where a count can see the effect and one "
                             "server process holds it, timed otherwise; counted, timed, or both")
    parser.add_argument("--variant", default=planning.DEFAULT_VARIANT, metavar="NAME",
                        help="build variant of entries that name none (default: default, the project's own build)")
    parser.add_argument("--counted-runs", type=positive_int, default=3, metavar="N",
                        help="counted runs per side (default 3; at least 2)")
    parser.add_argument("--timed-runs", type=positive_int, default=7, metavar="N",
                        help="timed runs per side (default 7)")
    parser.add_argument("--max-runs", type=positive_int, default=15, metavar="N",
                        help="timed: an undecided test gets more runs, up to N per side (default 15)")
    parser.add_argument("--duration", type=whole_seconds, default=10.0, metavar="TIME",
                        help="timed: measured time per run instead of the suites' own (default 10s)")
    parser.add_argument("--warmup", type=duration, default=2.0, metavar="TIME", help="timed: warm-up per run (default 2s)")
    add_scale_argument(parser)
    add_window_argument(parser, "counted: size each run's request count for at least N instructions (default 150000000)")
    parser.add_argument("--again", action="store_true",
                        help="measure the selected entries (--only) again even where they were measured before "
                             "(after a fix in redline); the table shows the latest measurement")
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="write the table (into FILE between its accuracy-table markers, if it has them)")
    parser.add_argument("--check", action="store_true",
                        help="only check the corpus (schema, history, catalogue): every problem, one line each")
    parser.add_argument("--table-only", action="store_true", help="measure nothing: the table of what the store holds")
    parser.set_defaults(func=accuracy_command)


def checked_corpus(args) -> Corpus:
    """The corpus with every problem found: schema, catalogue, and history when a repository is given."""
    corpus = load_corpus(args.corpus)
    if not args.catalogue.is_dir():
        raise UsageError(f"--catalogue {args.catalogue}: not a directory of suites")
    problems = check_schema(corpus) + check_catalogue(corpus, args.catalogue)
    if args.repository is not None:
        problems += check_history(corpus, Repository(args.repository))
    if args.check:
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s) in {len(corpus.entries)} entries" if problems
              else f"ok: {len(corpus.entries)} entries" + ("" if args.repository else " (history not checked: no --repository)"))
        if problems:
            raise SystemExit(2)
    refuse(problems, f"`redline accuracy {args.corpus} --check`")
    return corpus


def settings_of(args) -> planning.Settings:
    if args.counted_runs < 2:
        raise UsageError(f"--counted-runs {args.counted_runs}: the counted verdict rule needs at least 2 runs per side")
    if args.max_runs < args.timed_runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --timed-runs ({args.timed_runs})")
    from redline.builder import load_variant
    load_variant(args.variant)
    return planning.Settings(measure=args.measure, variant=args.variant, counted_runs=args.counted_runs,
                             timed_runs=args.timed_runs, timed_max_runs=args.max_runs, duration_s=args.duration,
                             warmup_s=args.warmup, scale=args.scale, window_instructions=args.window_instructions)


def reproduce_command(args) -> str:
    parts = ["redline accuracy", str(args.corpus), f"--repository {args.repository or 'REPO'}",
             f"--catalogue {args.catalogue}", f"--store {args.store}"]
    defaults = {"measure": planning.AUTO, "variant": planning.DEFAULT_VARIANT, "counted_runs": 3, "timed_runs": 7,
                "max_runs": 15, "duration": 10.0, "warmup": 2.0, "scale": None, "window_instructions": None}
    for name, default in defaults.items():
        value = getattr(args, name)
        if value != default:
            shown = f"{value:g}s" if name in ("duration", "warmup") else value
            parts.append(f"--{name.replace('_', '-')} {shown}")
    return " ".join(parts)


def accuracy_command(args) -> int:
    corpus = checked_corpus(args)
    if args.check:
        return EXIT_OK
    settings = settings_of(args)
    if args.again and not args.only:
        raise UsageError("--again measures entries again: name them with --only REGEX")
    if not args.table_only and args.repository is None:
        raise UsageError("--repository PATH is needed to build the corpus' commits (or --table-only)")
    inspect_store_file(args.store)
    check_outputs(args, {"--markdown": args.markdown})
    selected = corpus.entries
    if args.only:
        selected = [e for e in corpus.entries if re.search(args.only, e.name)]
        if not selected:
            raise UsageError(f"--only {args.only!r} matches no entry of {args.corpus}")
    store = Store(args.store)
    workdir = args.store.with_name(f"{args.store.stem}-artifacts") / "accuracy-suites"
    documents = runner.stored_documents(store)
    planned = runner.plan_corpus(corpus, selected, settings, catalogue=args.catalogue, workdir=workdir,
                                 documents=documents)
    console = terminal.console(stderr=True)
    failed = 0
    if not args.table_only:
        jobs_by_name = {entry.name: jobs for entry, jobs in planned}
        jobs = [job for entry in planning.order(selected) for job in jobs_by_name[entry.name]
                if job.kind in runner_kinds(job, settings)]
        measurer = runner.LabMeasurer(repository=Repository(args.repository), store_path=args.store, settings=settings,
                                      console=console, argv=["redline", *sys.argv[1:]])
        written = runner.measure(jobs, store=store, measurer=measurer, again=args.again,
                                 say=lambda line: console.print(line, style="bold", soft_wrap=True, markup=False))
        failed = sum(d.get("status") == FAILED for d in written.values())
        documents = runner.stored_documents(store)
    rows = runner.rows(planned, documents)
    scores = score(rows)
    out = terminal.console()
    for line in table.terminal_lines([r for r in rows if r.name in {e.name for e in selected}], scores):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    if args.markdown:
        machines = [d["machine"] for d in documents.values() if d.get("machine") and d.get("status") == "measured"]
        table.write_markdown(args.markdown, table.markdown(rows, scores, machines=machines,
                                                           command=reproduce_command(args)))
        console.print(f"wrote {args.markdown}")
    return EXIT_FAILED if failed else EXIT_OK


def runner_kinds(job: runner.Job, settings: planning.Settings) -> set[str]:
    """The ways this invocation measures a selected entry: those --measure asks for."""
    if settings.measure == planning.AUTO:
        return {job.kind} if job.primary else set()
    return {planning.COUNTED, planning.TIMED} if settings.measure == planning.BOTH else {settings.measure}
