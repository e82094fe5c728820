import sys

from ptdbg_tui.cli import main

sys.exit(main())
