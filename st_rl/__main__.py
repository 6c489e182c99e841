import sys

from st_rl.cli import main

sys.exit(main())
