"""Prometheus metrics: job counts, scan durations and volumes (read from the store at scrape time, so they
are right whichever API process is scraped and whichever worker ran the job), plus this process's requests."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from workers.store import DURATION_BUCKETS, UNAVAILABLE, JobStatus, Store


class StoreCollector(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        try:
            self.store.prune()  # jobs whose records expired leave the counts (only a listing dropped them)
            counts = self.store.counts()
            totals = self.store.metrics()
            up = 1.0
        except UNAVAILABLE:
            counts, totals, up = {}, {}, 0.0
        yield GaugeMetricFamily("dscan_redis_up", "Whether the job store (Redis) answers", value=up)
        if not up:
            return
        jobs = GaugeMetricFamily("dscan_jobs", "Jobs kept in the store, by status", labels=["status"])
        ended = CounterMetricFamily("dscan_jobs_ended", "Jobs that ended, by status", labels=["status"])
        for status in JobStatus:
            jobs.add_metric([status.value], counts.get(status, 0))
            if status.ended:
                ended.add_metric([status.value], totals.get(f"ended:{status.value}", 0.0))
        yield jobs
        yield ended
        yield CounterMetricFamily(
            "dscan_items_scanned", "Items (samples, files, records) scanned", totals.get("items", 0)
        )
        yield CounterMetricFamily("dscan_bytes_scanned", "Bytes of data scanned", totals.get("bytes", 0))
        buckets = [(f"{b:g}", totals.get(f"duration_le:{b:g}", 0.0)) for b in DURATION_BUCKETS]
        count = totals.get("duration_count", 0.0)
        yield HistogramMetricFamily(
            "dscan_scan_duration_seconds",
            "Duration of succeeded scans, from planning to report",
            buckets=[*buckets, ("+Inf", count)],
            sum_value=totals.get("duration_sum", 0.0),
        )


class Metrics:
    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(StoreCollector(store))
        ProcessCollector(registry=self.registry)
        self.requests = Histogram(
            "dscan_http_request_duration_seconds",
            "API request latency (this process)",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        )
