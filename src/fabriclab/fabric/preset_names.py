"""The names of the cluster presets, without building them: help texts list them from here, so that
`--help` does not import the cluster model. `fabric/presets.py` holds one function per name; a test keeps
the two equal (tests/cli/test_cli_help.py).

Try it: `fabriclab simulate collective --help` (the `--cluster` line lists these).
"""

PRESET_NAMES = ("tx-gaia-25gbe", "tx-gaia-opa", "a100-hdr", "dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200")
