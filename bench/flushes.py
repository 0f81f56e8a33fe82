#!/usr/bin/env python3
"""How long this machine's disk takes to flush, as the server's record of reads flushes it.

    python3 bench/flushes.py DIRECTORY SECONDS

Writes 600 bytes at a time over a file of zeros in DIRECTORY (as the SQLite journal of reads
is written: over its zeros, inside its length) and flushes each write with fdatasync, one
after another with a millisecond between them, for SECONDS; then removes the file and prints
one line: the flushes' p50, p99 and longest, and how many took over 10 ms.

bench/run prints it before and after its scenarios. Every read of patient data waits for a
flush like this one (SQLite's journal of reads, PostgreSQL's WAL) before its data may leave,
so a disk that stalls for 100 ms stalls every request then: the line tells whether a run's
p99 was the server's or the disk's.
"""

import math
import os
import sys
import time

SIZE = 1 << 20
LINE = b"x" * 600


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: flushes.py DIRECTORY SECONDS")
    directory, seconds = sys.argv[1], float(sys.argv[2])
    path = os.path.join(directory, "flushes.probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        # Zeros written and flushed first, so that each probe's write changes data, not the
        # file's length or its map of blocks.
        os.write(fd, bytes(SIZE))
        os.fsync(fd)
        took = []
        end = time.monotonic() + seconds
        offset = 0
        while time.monotonic() < end:
            os.pwrite(fd, LINE, offset)
            offset = (offset + len(LINE)) % (SIZE - len(LINE))
            start = time.perf_counter()
            os.fdatasync(fd)
            took.append(time.perf_counter() - start)
            time.sleep(0.001)
    finally:
        os.close(fd)
        os.unlink(path)
    if not took:
        print(f"no flush in {seconds:g} s")
        return
    took.sort()
    n = len(took)

    def ms(q: float) -> str:
        # The nearest rank: the smallest flush time that q of the flushes do not exceed.
        return f"{took[max(0, math.ceil(n * q) - 1)] * 1000:.2f}"

    slow = sum(1 for t in took if t > 0.010)
    print(
        f"{n} flushes in {seconds:g} s: p50 {ms(0.5)} ms, p99 {ms(0.99)} ms, "
        f"longest {took[-1] * 1000:.1f} ms, {slow} over 10 ms"
    )


if __name__ == "__main__":
    main()
