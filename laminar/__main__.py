import sys

from laminar.cli import main

sys.exit(main())
