"""``python -m lakectl``."""

from lakectl.cli import main

if __name__ == "__main__":
    main()
