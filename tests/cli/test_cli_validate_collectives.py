"""`fabriclab validate collectives` from the command line without root: options become the check's config,
bad input is one error line and exit 2 before anything is built (the run itself:
tests/bench/test_validate_collectives_root.py)."""

from __future__ import annotations

import inspect

import pytest
from typer.testing import CliRunner

from fabriclab.bench.validate.collectives.config import CheckConfig
from fabriclab.cli.validate import collectives as validate_collectives
from fabriclab.cli.main import app


def options(**given) -> dict:
    """The command's parsed parameters: its defaults, with `given` as typer would pass them."""
    params = inspect.signature(validate_collectives.collectives).parameters
    return {name: getattr(p.default, "default", p.default) for name, p in params.items()} | given


def test_the_defaults_are_the_checks_defaults():
    assert validate_collectives.check_config(options()) == CheckConfig()


def test_options_are_parsed_at_the_edge_into_numbers():
    config = validate_collectives.check_config(options(
        ops="allgather", hosts="3", calibrate_hosts="2", sizes="1MB,4MB", iters="3", warmup="0", link="2Gbps",
        dilation="2", queue="50ms", joint=False, timeout="30", nice="-5"))
    assert config == CheckConfig(ops=("allgather",), hosts=3, calibrate_hosts=2, sizes_bytes=(1 << 20, 4 << 20),
                                 iters=3, warmup=0, link="2Gbps", dilation=2.0, queue_s=0.05, joint=False,
                                 timeout_s=30.0, nice=-5)
    assert config.rate_Bps == 125e6


@pytest.mark.parametrize("args, fragment", [
    (["--calibrate-hosts", "4"], "--calibrate-hosts 4 is not below --hosts 4"),
    (["--ops", "allgather,bogus"], "unknown op 'bogus'"),
    (["--hosts", "0"], "--hosts"),
    (["--sizes", "1XB"], "invalid size"),
    (["--dilation", "0.5"], "--dilation"),
    (["--nice", "soon"], "--nice 'soon'"),
    (["--link", "fast"], "bandwidth"),
])
def test_bad_input_is_one_error_line_and_exit_2(args, fragment):
    result = CliRunner().invoke(app, ["validate", "collectives", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
