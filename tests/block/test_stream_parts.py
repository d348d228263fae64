"""Cutting a stream of chunks into the parts of a multipart write."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakefs_core.block.base import stream_parts


def cut(chunks: list[bytes], sizes: tuple[int, ...]) -> list[tuple[bytes, bool]]:
    return list(stream_parts(chunks, lambda i: sizes[min(i, len(sizes) - 1)]))


def test_parts_have_their_sizes_and_the_last_is_flagged() -> None:
    assert cut([b"abcdefg"], (3,)) == [(b"abc", False), (b"def", False), (b"g", True)]
    assert cut([b"ab", b"cd", b"e", b"fgh"], (2, 4)) == [(b"ab", False), (b"cdef", False),
                                                         (b"gh", True)]
    # a stream of exactly one part, or nothing at all, is one last part
    assert cut([b"abc"], (3,)) == [(b"abc", True)]
    assert cut([b"ab", b"c"], (3,)) == [(b"abc", True)]
    assert cut([], (3,)) == [(b"", True)]
    assert cut([b"", b""], (3,)) == [(b"", True)]
    assert cut([b"abcdef"], (3,)) == [(b"abc", False), (b"def", True)]  # never an empty last


def test_a_part_is_given_before_the_stream_is_read_further() -> None:
    read: list[int] = []

    def chunks() -> Iterator[bytes]:
        for i in range(10):
            read.append(i)
            yield b"x" * 4

    parts = stream_parts(chunks(), lambda _: 8)
    assert next(parts) == (b"x" * 8, False)
    assert read == [0, 1, 2]  # the third chunk showed that more follows the first part

    def failing() -> Iterator[bytes]:
        yield b"abc"
        raise RuntimeError("producer died")

    with pytest.raises(RuntimeError, match="producer died"):
        list(stream_parts(failing(), lambda _: 2))
