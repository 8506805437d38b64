"""`ember export --format openlineage`: an OpenLineage RunEvent for one captured action.

Datasets: the source files read (inputs) and what the action produced (output), with a
column lineage facet on the output: per output column, the source columns it is computed
from, read off the captured plan (`ember.plan.columns`; stores saved before it was
recorded have none). A custom run facet, `emberRowLineage`, points at the row-level
lineage in the store.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    RunFacet,
    column_lineage_dataset,
    job_type_job,
    schema_dataset,
)
from openlineage.client.serde import Serde

import ember
from ember.cli.runstore import Entry
from ember.cli.runstore import Run as EmberRun

PRODUCER = f"https://github.com/ember-lineage/ember/tree/v{ember.__version__}"
NAMESPACE = "ember"
FACET_SCHEMA = "https://ember-lineage.dev/spec/EmberRowLineageRunFacet.json"


@attr.define
class EmberRowLineageRunFacet(RunFacet):
    """Where the row-level lineage of this run is: an ember lineage store (docs/design/store.md)."""

    store: str
    entry: str
    format: str
    formatVersion: int
    mode: str
    outputRows: int | None

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA


def run_event(folder: Path, run: EmberRun, entry: Entry, manifest: dict[str, Any]) -> RunEvent:
    """The COMPLETE RunEvent of the job that performed `entry`'s action (its run id is
    derived from the `ember run` and the entry, so exporting twice gives the same id)."""
    datasets = {
        s["name"]: [(_namespace(f["uri"]), _name(f["uri"])) for f in s.get("files", [])]
        # in-memory DataFrames and spark.range: no file to name
        or [(NAMESPACE, f"{run.script}:{s['name']}")]
        for s in manifest.get("sources", [])
    }
    inputs = [InputDataset(namespace=ns, name=name) for named in datasets.values() for ns, name in named]
    fields = [
        schema_dataset.SchemaDatasetFacetFields(name=c["name"], type=c["type"])
        for c in manifest.get("output", {}).get("schema", [])
    ]
    target = entry.target or f"{folder.resolve()}/{entry.name}"
    output = OutputDataset(
        namespace=_namespace(target) if entry.target else NAMESPACE,
        name=_name(target) if entry.target else target,
        facets={"schema": schema_dataset.SchemaDatasetFacet(fields=fields), **_column_lineage(manifest, datasets)},
    )
    facet = EmberRowLineageRunFacet(
        store=str((folder / entry.name).resolve()),
        entry=entry.name,
        format=str(manifest.get("format")),
        formatVersion=int(manifest.get("version", 0)),
        mode=entry.status,
        outputRows=entry.rows,
    )
    job_type = job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType="ACTION")
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=entry.time,
        producer=PRODUCER,
        run=Run(runId=str(uuid.uuid5(uuid.UUID(run.run_id), entry.name)), facets={"emberRowLineage": facet}),
        job=Job(namespace=NAMESPACE, name=f"{Path(run.script).name}:{entry.name}", facets={"jobType": job_type}),
        inputs=inputs,
        outputs=[output],
    )


def _column_lineage(manifest: dict[str, Any], datasets: dict[str, list[tuple[str, str]]]) -> dict[str, Any]:
    columns = manifest.get("info", {}).get("columns", [])
    if not columns:
        return {}
    fields = {
        name: column_lineage_dataset.Fields(
            inputFields=[
                column_lineage_dataset.InputField(namespace=ns, name=dataset, field=column)
                for source, column in origins
                for ns, dataset in datasets.get(source, [])
            ]
        )
        for name, origins in columns
    }
    return {"columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields)}


def to_json(event: RunEvent) -> str:
    return str(Serde.to_json(event))


def _namespace(uri: str) -> str:
    """OpenLineage naming: `file` for local paths, else scheme://authority."""
    if "://" not in uri:
        return "file"
    scheme, rest = uri.split("://", 1)
    return "file" if scheme == "file" else f"{scheme}://{rest.split('/', 1)[0]}"


def _name(uri: str) -> str:
    if "://" not in uri:
        return str(Path(uri).resolve()) if not uri.startswith("file:") else uri[5:]
    rest = uri.split("://", 1)[1]
    return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
