"""`python -m supervisor` is the `sandvisor` command."""

from supervisor.cli import main

raise SystemExit(main())
