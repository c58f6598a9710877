import sys

from streaming.app.cli import main

sys.exit(main())
