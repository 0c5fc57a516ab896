"""The dlt contender of bench/peer-dlt.mjs: one workload of the peer benchmark with dlt's
`rest_api` source into DuckDB, in its parallel configuration, then a check that exactly the
expected rows landed. Prints one JSON line: rows per table, and seconds spent in each step of
`pipeline.run` (extract, normalize, load) and in all three.

    python3 bench/peer_dlt.py '<json: base_url, api_key, workload, handles, per_channel, workers, dir>'

Run with PYTHONPATH=.tools/bench-python (dlt is installed there by bench/peer-dlt.mjs).
"""

import json
import os
import sys
import time

spec = json.loads(sys.argv[1])
# dlt reads its extract settings from the environment at extraction time; set before importing it.
# workers: threads that run parallelized resources' pages and transformer calls; max_parallel_items
# (pending calls) must not be what caps them.
os.environ["EXTRACT__WORKERS"] = str(spec["workers"])
os.environ["EXTRACT__MAX_PARALLEL_ITEMS"] = str(max(20, spec["workers"]))
# Talk to 127.0.0.1 only: no anonymous usage telemetry.
os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"

import dlt  # noqa: E402
import duckdb  # noqa: E402
from dlt.sources.rest_api import rest_api_source  # noqa: E402

PAGE = 50
paginator = {
    "type": "cursor",
    "cursor_path": "meta.cursor",
    "cursor_param": "cursor",
    "has_more_path": "meta.has_more",
}


def channel_resource(name, handle):
    return {
        "name": name,
        "write_disposition": "append",
        "endpoint": {
            "path": "tiktok/channel-videos",
            "params": {"handle": handle, "limit": PAGE},
            "data_selector": "data",
            "paginator": paginator,
        },
    }


handles = spec["handles"]
if spec["workload"] == "channels":
    resources = [channel_resource(f"videos_{index}", handle) for index, handle in enumerate(handles)]
    expected = {f"videos_{index}": spec["per_channel"] for index in range(len(handles))}
else:
    resources = [
        channel_resource("videos", handles[0]),
        {
            # One stats call per listed video, each a deferred call in dlt's thread pool.
            "name": "stats",
            "parallelized": True,
            "write_disposition": "append",
            "endpoint": {
                "path": "tiktok/stats",
                "params": {"url": "{resources.videos.url}"},
                "data_selector": "data",
                "paginator": "single_page",
            },
        },
    ]
    expected = {"videos": spec["per_channel"], "stats": spec["per_channel"]}

source = rest_api_source(
    {
        "client": {
            "base_url": spec["base_url"].rstrip("/") + "/",
            "auth": {"type": "bearer", "token": spec["api_key"]},
        },
        "resources": resources,
    },
    # Every resource's pages are pulled in the thread pool, side by side with the others'.
    parallelized=True,
)
# The channels have more than per_channel videos: stop each listing at exactly that many rows
# (pages of 50 divide it, so the last page is not trimmed and no extra page is bought).
for name in expected:
    if name != "stats":
        source.resources[name].add_limit(spec["per_channel"], count_rows=True)

pipeline = dlt.pipeline(
    pipeline_name="peer",
    pipelines_dir=os.path.join(spec["dir"], "pipelines"),
    destination=dlt.destinations.duckdb(os.path.join(spec["dir"], "warehouse.duckdb")),
    dataset_name="peer",
)
# pipeline.run's three steps one by one, to tell the API-bound extract from the rest.
steps = {}
for step, call in (("extract", lambda: pipeline.extract(source)), ("normalize", pipeline.normalize), ("load", pipeline.load)):
    started = time.monotonic()
    call()
    steps[step] = time.monotonic() - started

with duckdb.connect(os.path.join(spec["dir"], "warehouse.duckdb"), read_only=True) as db:
    rows = {}
    distinct = {}
    for table in expected:
        key = "entity_id" if table == "stats" else "id"
        rows[table], distinct[table] = db.execute(f"SELECT count(*), count(DISTINCT {key}) FROM peer.{table}").fetchone()

wrong = {table: (rows[table], distinct[table]) for table, want in expected.items() if rows[table] != want or distinct[table] != want}
if wrong:
    sys.exit(f"dlt loaded the wrong rows (rows, distinct ids) per table: {wrong}; expected {expected}")
print(json.dumps({"seconds": sum(steps.values()), "steps": steps, "rows": rows}))
