"""One module per `hlofuse` subcommand beyond parse/print; each defines a click command and
registers it with `@main.command(...)` from hlofuse.cli.  cli.py imports them all."""
