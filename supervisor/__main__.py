"""`python -m supervisor` is the `sandvisor` command."""

from supervisor.commands.cli import main

raise SystemExit(main())
