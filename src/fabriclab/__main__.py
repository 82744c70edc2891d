"""`python -m fabriclab ...` is the `fabriclab` command (what the emulated hosts run)."""

from fabriclab.cli.main import app

if __name__ == "__main__":
    app(prog_name="fabriclab")
