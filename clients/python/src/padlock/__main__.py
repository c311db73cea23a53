"""`python -m padlock top` and `python -m padlock graph` (see `_cli`)."""

import sys

from ._cli import main

sys.exit(main())
