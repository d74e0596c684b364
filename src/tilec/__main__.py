"""`python -m tilec ...` is the `tilec` command."""

from tilec.cli import main

if __name__ == "__main__":
    main()
