from pytest_brokerperf.core import header


def test_header_is_32_bytes_and_round_trips():
    raw = header.pack(header.MAGIC, header.VERSION, header.KIND_DATA, 7, 123456789, 10**15,
                      10**15 + 5)
    assert len(raw) == header.HEADER_SIZE == 32
    assert header.unpack(raw + b"x" * 100) == (
        header.MAGIC, header.VERSION, header.KIND_DATA, 7, 123456789, 10**15, 10**15 + 5)
