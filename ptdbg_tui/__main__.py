from ptdbg_tui.cli import run

run()
