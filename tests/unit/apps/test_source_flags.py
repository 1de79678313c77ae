"""``hareplica run``'s flags of source options come from the declaration (issue 54): the options marked
``app_flag`` in connector/options/declaration.py each get their flag, dest, type, default and help from their
record, and the app hands them back to the source under the declared names."""

from __future__ import annotations

import argparse

import pytest

from connector.options.declaration import OPTIONS
from connector.options.parse import SourceOptions
from streaming_apps.apps.common import AppConfig
from streaming_apps.cli import build_parser

FLAGGED = [option for option in OPTIONS.values() if option.app_flag]


def _run_actions() -> dict[str, argparse.Action]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    return {flag: action for action in sub.choices["run"]._actions for flag in action.option_strings}  # noqa: SLF001


def test_the_flag_names_follow_the_option_names():
    assert [o.flag for o in FLAGGED] == ["--starting-offsets", "--starting-timestamp", "--max-bytes-per-trigger",
                                         "--min-partitions", "--no-fail-on-data-loss"]


@pytest.mark.parametrize("option", FLAGGED, ids=lambda o: o.name)
def test_each_flag_is_built_from_its_record(option):
    action = _run_actions()[option.flag]
    assert action.dest == option.attr
    assert action.default == option.default
    assert option.meaning in action.help and f"the source's {option.name}" in action.help


@pytest.mark.parametrize("option", [o for o in FLAGGED if o.kind == "int"], ids=lambda o: o.name)
def test_an_integer_flag_refuses_what_the_option_refuses(option):
    """Below the declared minimum is refused by argparse with the flag named, as the parser would refuse it."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "bronze", "--brokers", "a=h:2", option.flag, str(option.minimum - 1)])


def test_the_app_passes_the_flags_under_the_declared_names(tmp_path):
    args = build_parser().parse_args(["run", "bronze", "--brokers", "broker-a=127.0.0.1:10912", "--starting-offsets",
                                      "latest", "--max-bytes-per-trigger", "1048576", "--min-partitions", "2",
                                      "--no-fail-on-data-loss"])
    config = AppConfig(app="bronze", brokers=args.brokers, workdir=tmp_path,
                       **{o.attr: getattr(args, o.attr) for o in FLAGGED if o.attr != "starting_timestamp"})
    options = config.source_option_map()
    assert options == {"brokers": "broker-a=127.0.0.1:10912", "startingOffsets": "latest",
                       "maxBytesPerTrigger": "1048576", "minPartitions": "2", "failOnDataLoss": "false"}
    parsed = SourceOptions.from_options(options)
    assert (parsed.starting_offsets, parsed.max_bytes_per_trigger, parsed.min_partitions,
            parsed.fail_on_data_loss) == ("latest", 1048576, 2, False)


WHERE = [OPTIONS.brokers, OPTIONS.namesrv_addr]


def _actions(command: str) -> dict[str, argparse.Action]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    return {flag: action for action in sub.choices[command]._actions for flag in action.option_strings}  # noqa: SLF001


@pytest.mark.parametrize("command", ["run", "read", "status"])
@pytest.mark.parametrize("option", WHERE, ids=lambda o: o.name)
def test_the_where_flags_are_built_from_the_brokers_and_namesrv_addr_records(command, option):
    """``--brokers`` and ``-n/--namesrv-addr``: flag, dest and the meaning in the help from the declaration; one or
    the other (required by run and read); ``status`` says first what it does with them."""
    actions = _actions(command)
    action = actions[option.flag]
    assert action.dest == option.attr and action.default is None
    if command == "status":
        assert action.help.startswith("also ")
        assert action.help.endswith(f"; as the source's {option.name}: {option.meaning}")
    else:
        assert action.help == f"{option.meaning} (the source's {option.name})"
    assert actions["-n"] is actions[OPTIONS.namesrv_addr.flag]
    assert actions["-n"].metavar == "HOST:PORT[;HOST:PORT]"


@pytest.mark.parametrize("command", [["run", "bronze"], ["read"]], ids=lambda c: c[0])
def test_a_command_that_reads_needs_brokers_or_namesrv_addr_and_refuses_both(command):
    for where in ([], ["--brokers", "a=h:1", "-n", "h:9876"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*command, *where])
    args = build_parser().parse_args([*command, "-n", "h:9876;g:9876"])
    assert (args.brokers, args.namesrv_addr) == (None, "h:9876;g:9876")


def test_status_takes_either_where_flag_or_neither():
    assert vars(build_parser().parse_args(["status", "--brokers", "a=h:1"]))["brokers"] == "a=h:1"
    args = build_parser().parse_args(["status"])
    assert (args.brokers, args.namesrv_addr) == (None, None)
