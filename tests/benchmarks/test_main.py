"""``python -m benchmarks``: every suite imports and takes --quick and --out; the list of suites."""

from __future__ import annotations

import pytest

from benchmarks import __main__ as cli


@pytest.mark.parametrize("name", sorted(cli.SUITES))
def test_every_suite_has_a_command_line_and_a_report(name):
    suite, parser = cli.suite_parser(name)
    args = parser.parse_args(["--quick", *(["a.json", "b.json"] if name == "peers" else [])])
    assert args.quick and args.out is None
    assert callable(suite.run) and callable(suite.markdown) and suite.__doc__


def test_without_a_suite_it_lists_them(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([])
    assert exit_.value.code == 0 and "latency" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        cli.main(["no-such-suite"])
    assert exit_.value.code == 2
