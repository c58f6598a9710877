"""`python3 -m scripts.coordinator_templates` (from the repository root)."""
import sys

from scripts.coordinator_templates.cli import main

if __name__ == "__main__":
    sys.exit(main())
