"""`python -m schedules`: define, register and steer the catalog's schedules on Temporal."""

from schedules.cli.main import main
from worker.process import exit_process

if __name__ == "__main__":
    exit_process(main())
