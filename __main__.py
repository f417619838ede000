"""``python -m predops``: the ``predops`` command."""

from predops.pipelines.cli.main import main

main(prog_name="predops")
