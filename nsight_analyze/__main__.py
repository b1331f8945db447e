"""`python -m nsight_analyze` runs the CLI."""

from .cli import main

main()
