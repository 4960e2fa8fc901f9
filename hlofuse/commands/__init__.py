"""One module per `hlofuse` subcommand beyond parse/print; each defines a click command and
registers it with `@main.command(...)` from hlofuse.cli, whose table COMMANDS names the module
(cli.py imports it when the command is used)."""
