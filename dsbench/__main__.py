import sys

from dsbench.cli import main

sys.exit(main())
