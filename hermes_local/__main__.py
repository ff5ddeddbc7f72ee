"""`python -m hermes_local` runs the CLI."""

from hermes_local.cli.app import main

main()
