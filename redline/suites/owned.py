"""What redline decides and a suite cannot: the one list of redline-owned options.

A suite says what load to send and how the server is configured. Where that load goes, where
files are written and what counts as a run are redline's: otherwise a suite could send the
load to another server (and the run would be stored as this server's), write or truncate any
path, or change what a run measures. Used by the suite reader (a warning at file:line, shown by
`redline suites validate` and by `redline run`), by the run path (`redline.load.redline_load` drops these
from every redline-load command line, `redline.server.targets` refuses them in --config) and by the
server start (its files stay in redline's work directory).

In a suite each one is dropped with a warning, not rejected: upstream suites carry options of
their own runner (output files, run counts) and their load is the same without
them; redline supplies its own value. On redline's command line (--config) the same names are
refused: there the user asked for it, and silently not doing it would be a wrong result.
"""
from __future__ import annotations

TRAFFIC = "where the load goes"
OUTPUT = "where files are written"
MEASURED = "what a run measures"
PROCESS = "how redline runs the load generator"

# memtier_benchmark long option -> why redline sets it (short forms resolve to these names)
CLIENT_OPTIONS: dict[str, str] = {
    **dict.fromkeys(("server", "host", "port", "unix-socket", "uri", "ipv4", "ipv6", "authenticate",
                     "tls", "cert", "key", "cacert", "tls-skip-verify", "sni", "tls-protocols"), TRAFFIC),
    **dict.fromkeys(("out-file", "json-out-file", "hdr-file-prefix", "client-stats", "failed-keys-file",
                     "statsd-host", "statsd-port", "statsd-prefix", "statsd-run-label", "graphite-port"),
                    OUTPUT),
    "run-count": MEASURED,
    "reconnect-on-error": MEASURED,     # whether a run that lost connections is a result
    "warmup-time": MEASURED,            # redline-load's own options (loadgen/memtier_options.tsv)
    "events": PROCESS,
    "io": PROCESS,                      # redline-load's I/O path: the same for every suite (docs/loadgen.md)
    **dict.fromkeys(("help", "version", "show-config", "debug"), PROCESS),
}

# redis-server configuration parameter -> why redline sets it (names are case-insensitive)
SERVER_PARAMETERS: dict[str, str] = {
    **dict.fromkeys(("port", "bind", "unixsocket", "unixsocketperm", "tls-port", "replicaof", "slaveof",
                     "cluster-enabled"), TRAFFIC),
    **dict.fromkeys(("dir", "logfile", "dbfilename", "pidfile", "appendfilename", "appenddirname",
                     "cluster-config-file", "daemonize", "supervised"), OUTPUT),
}


def owned_command(argv: list[str]) -> str | None:
    """Why a command a suite sends (init command, --command) would change what redline owns, or
    None: CONFIG SET of a redline-owned parameter, REPLICAOF/SLAVEOF. Refused, not dropped:
    without the command the suite's load would not be what it says."""
    name = argv[0].upper() if argv else ""
    if name in ("REPLICAOF", "SLAVEOF"):
        return f"{name} makes the server copy another one ({TRAFFIC} is redline's to decide)"
    if name == "CONFIG" and len(argv) > 2 and argv[1].upper() == "SET":
        owned = next((parameter for parameter in argv[2::2] if owned_server_parameter(parameter)), None)
        if owned:
            return f"CONFIG SET {owned}: redline sets this parameter itself ({owned_server_parameter(owned)})"
    return None


def client_option_note(name: str) -> str:
    """The warning for a suite's memtier option that redline sets itself."""
    return f"--{name} is set by redline ({CLIENT_OPTIONS[name]}); the suite's value is dropped"


def owned_server_parameter(name: str) -> str | None:
    """Why redline sets this server configuration parameter itself, or None."""
    return SERVER_PARAMETERS.get(name.strip().lower())


def server_parameter_note(name: str) -> str:
    return (f"configuration parameter {name} is set by redline ({owned_server_parameter(name)}); "
            "the suite's value is dropped")
