"""The command-line modules: one per ``python -m relviz`` subcommand (``add_arguments``, ``run``);
relviz/__main__.py dispatches to them."""
