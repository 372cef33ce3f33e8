#!/usr/bin/env python3
"""Parquet rows/s: trlhpc's reader (build/bench/parquet_bench) vs pyarrow, on a 100k-row conversational
file shaped like a Hub chat dataset (messages = list<struct<content, role>>, 4 turns, snappy, dictionary,
pyarrow's default row groups). Both read every row into the host language's objects: pyarrow as
read_table(path).to_pylist() (Python dicts), trlhpc as nlohmann JSON rows, what training consumes.
Also pyarrow's read_table alone (columnar, no row objects) as the floor.

Peer: pyarrow (pip install pyarrow).  Run: python3 bench/parquet_bench.py [build/bench/parquet_bench]
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 100_000


def make(path):
    rng = random.Random(0)
    words = ["sun", "moon", "river", "light", "door", "hill", "lake", "green", "dark", "stone"]
    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))
    rows = [{"messages": [{"role": "user", "content": text(12)}, {"role": "assistant", "content": text(30)},
                          {"role": "user", "content": text(8)}, {"role": "assistant", "content": text(20)}]}
            for _ in range(ROWS)]
    pq.write_table(pa.Table.from_pylist(rows), path, compression="snappy")


def best(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/bench/parquet_bench"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "chat100k.parquet")
        make(path)
        size = os.path.getsize(path)
        t_pylist = best(lambda: pq.read_table(path).to_pylist())
        t_table = best(lambda: pq.read_table(path))
        out = json.loads(subprocess.run([binary, path, "3"], check=True, capture_output=True, text=True).stdout)
    print(json.dumps({
        "rows": ROWS, "file_bytes": size, "pyarrow": pa.__version__,
        "pyarrow_to_pylist_rows_per_s": round(ROWS / t_pylist),
        "pyarrow_read_table_rows_per_s": round(ROWS / t_table),
        "trlhpc_rows_per_s": out["rows_per_second"],
        "trlhpc_vs_to_pylist": round(out["rows_per_second"] / (ROWS / t_pylist), 2),
    }, indent=1))


if __name__ == "__main__":
    main()
