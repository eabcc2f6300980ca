import sys

from realdist.cli import main

sys.exit(main())
