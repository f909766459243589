"""The CLI's commands, one module each (registered in :data:`topoagent.cli.COMMANDS`), and
what they share: :mod:`~topoagent.core.command.options` (the scan-input options every command
takes) and :mod:`~topoagent.core.command.common` (exit codes, errors, output)."""
