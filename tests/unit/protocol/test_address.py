"""connector.protocol.address: the one host:port parser of options, stub config and clients."""

from __future__ import annotations

import pytest

from connector.errors import AddressError
from connector.protocol.address import join_host_port, split_host_port, vip_channel_address


def test_host_names_ipv4_and_bracketed_ipv6():
    assert split_host_port(" 10.0.0.1:10911 ") == ("10.0.0.1", 10911)
    assert split_host_port("h.example:3") == ("h.example", 3)
    assert split_host_port("[::1]:20912") == ("::1", 20912)
    assert split_host_port("[fe80::1%eth0]:1") == ("fe80::1%eth0", 1)


@pytest.mark.parametrize("text", ["no-port", "host:", ":10911", "host:0", "host:65536", "host:x1", "[::1]10911",
                                  "[not-v6]:1", "::1:10911", "a:b:1"])
def test_anything_else_is_refused_naming_what_it_was(text):
    with pytest.raises(AddressError, match=r"^HA address of b '.*' is not host:port with a port in 1\.\.65535"):
        split_host_port(text, "HA address of b")


def test_bare_ipv6_splits_at_the_last_colon_as_rocketmq_does():
    assert split_host_port("::1:10911", bare_ipv6=True) == ("::1", 10911)
    assert split_host_port("0:0:0:0:0:0:0:1:9876", bare_ipv6=True) == ("0:0:0:0:0:0:0:1", 9876)
    with pytest.raises(AddressError):
        split_host_port("a:b:1", bare_ipv6=True)  # not an IPv6 literal


def test_join_and_shift_round_trip():
    assert join_host_port("::1", 10911) == "[::1]:10911"
    assert join_host_port("10.0.0.1", 10911) == "10.0.0.1:10911"
    assert split_host_port(join_host_port("::1", 7)) == ("::1", 7)
    assert vip_channel_address("[::1]:10911") == "[::1]:10909"
    assert vip_channel_address("::1:10911") == "[::1]:10909"
