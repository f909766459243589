"""The CLI's commands, one module each (registered in :data:`topoagent.cli.COMMANDS`), and
what they share: :mod:`~topoagent.commands.options` (the scan-input options every command
takes) and :mod:`~topoagent.commands.common` (exit codes, errors, output)."""
