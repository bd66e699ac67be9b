"""The benchmarks of `exactly bench report`, each turned into figures (with ratios) and raw samples.

Each `run_*` calls the benchmark module's own measuring functions (nothing is measured twice over),
puts every raw sample into the benchmark's `Sheet` (`raw/<name>.csv`) and returns the figures computed
from those rows, so a figure and its CSV cannot disagree. The sizes are in `exactly.bench.plan`.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import statistics
import tempfile
from pathlib import Path

from exactly.bench import broker as broker_bench
from exactly.bench.figures import Figure, Sheet, percentile
from exactly.bench.machine import DROP_BEHIND_WINDOW
from exactly.bench.plan import MB, BoundFigures, Plan, figure, times
from exactly.bench.rounds import SAMPLE_EVERY, TimedRound

# --- machine bounds ----------------------------------------------------------------------------------------


def run_bounds(plan: Plan, work: Path, sheet: Sheet) -> tuple[list[Figure], BoundFigures, list[str]]:
    from exactly.bench.machine import measure_bounds

    bounds = measure_bounds(
        work,
        plan.fsyncs,
        plan.seq_write_mib << 20,
        plan.loopback_mib << 20,
        plan.bound_rounds,
        (plan.broker_warmup_s, plan.broker_seconds),
    )
    sheet.add("fsync_4k_ms", (s * 1e3 for s in bounds.fsync_seconds), "ms")
    sheet.add("seq_write_fsync_mb_s", bounds.seq_write_mb_s, "MB/s")
    sheet.add("loopback_mb_s", bounds.loopback_mb_s, "MB/s")
    for r, written in enumerate(bounds.sustained):
        sheet.add("sustained_write_mb_s", [written.mb_s], "MB/s", run=r)
        sheet.add("sustained_write_cpu_s_per_gb", [written.cpu_s_per_gb], "s/GB", run=r)
        sheet.add("sustained_write_window_mb_s", (b / MB for b in written.window_bytes), "MB/s", run=r)
    for r, written in enumerate(bounds.sustained_drop_behind):
        sheet.add("drop_behind_write_mb_s", [written.mb_s], "MB/s", run=r)
        sheet.add("drop_behind_write_cpu_s_per_gb", [written.cpu_s_per_gb], "s/GB", run=r)
        sheet.add("drop_behind_write_window_mb_s", (b / MB for b in written.window_bytes), "MB/s", run=r)
    p50, p99 = sheet.pct("fsync_4k_ms", 0.5), sheet.pct("fsync_4k_ms", 0.99)
    seq, loop = sheet.median("seq_write_fsync_mb_s"), sheet.median("loopback_mb_s")
    sustained, sustained_cpu = (
        sheet.median("sustained_write_mb_s"),
        sheet.median("sustained_write_cpu_s_per_gb"),
    )
    dropping, dropping_cpu = (
        sheet.median("drop_behind_write_mb_s"),
        sheet.median("drop_behind_write_cpu_s_per_gb"),
    )
    figures = [
        figure("bounds.fsync_p50_ms", "write 4 KiB + fsync, p50", p50, "ms", sheet),
        figure("bounds.fsync_p99_ms", "write 4 KiB + fsync, p99", p99, "ms", sheet),
        figure(
            "bounds.fsyncs_per_s",
            "fsyncs/s one after the other (1000 / p50)",
            (1e3 / p50[0], "1000 / fsync p50"),
            "1/s",
            sheet,
        ),
        figure("bounds.seq_write_fsync_mb_s", "sequential write, fsync per 384 KiB", seq, "MB/s", sheet),
        figure("bounds.loopback_mb_s", "loopback TCP copy (1 MiB sends)", loop, "MB/s", sheet),
        figure(
            "bounds.sustained_write_mb_s",
            "sustained write as long as a produce round: 6 files, 1 MiB writes, fdatasync each",
            sustained,
            "MB/s",
            sheet,
            times(sustained[0], seq[0], "the 384 KiB burst"),
        ),
        figure(
            "bounds.sustained_write_cpu_s_per_gb",
            "the sustained writer's CPU per GB (its thread's utime+stime: the kernel's copy and sync)",
            sustained_cpu,
            "s/GB",
            sheet,
        ),
        figure(
            "bounds.drop_behind_write_mb_s",
            f"the same sustained write, pages more than {DROP_BEHIND_WINDOW >> 20} MiB behind each file's "
            "end dropped after its fdatasync",
            dropping,
            "MB/s",
            sheet,
            times(dropping[0], sustained[0], "the sustained writer"),
        ),
        figure(
            "bounds.drop_behind_write_cpu_s_per_gb",
            "the drop-behind writer's CPU per GB",
            dropping_cpu,
            "s/GB",
            sheet,
            times(dropping_cpu[0], sustained_cpu[0], "the sustained writer"),
        ),
    ]
    notes = [
        f"Measured in `{bounds.directory}` ({bounds.filesystem}): the filesystem of the brokers' data "
        f"directories. {len(bounds.fsync_seconds)} fsyncs; {plan.bound_rounds} rounds of "
        f"{plan.seq_write_mib} MiB sequential write (a burst), of {plan.loopback_mib} MiB loopback copy "
        f"and of sustained write ({plan.broker_warmup_s} s + {plan.broker_seconds} s measured, the files "
        "deleted after each round as a produce round's topic is; `sustained_write_window_mb_s` has its "
        "seconds). The two writes differ by what the pages cost: a burst lands in memory this VM used "
        "a moment ago, while a sustained write, after about 3 GB, pays the host's fault on every page "
        "the guest had given back (Firecracker returns free memory a few seconds after it is freed), "
        "~2.5 s of system CPU per GB in the copy into the page cache. A produce round writes as much as "
        "the sustained writer and pays the same: the broker's produce figures are compared with it.",
        f"The drop-behind writer is the sustained writer telling the kernel after each fdatasync to drop "
        f"what lies more than {DROP_BEHIND_WINDOW >> 20} MiB behind the file's end "
        "(`posix_fadvise(DONTNEED)`): the next writes reuse those pages before the host takes them back. "
        "The `dropbehind` section's broker does the same (`exactly.log.drop.behind.bytes`) and is "
        "compared with it.",
    ]
    bound = BoundFigures(
        p50[0], p99[0], seq[0], loop[0], sustained[0], sustained_cpu[0], dropping[0], dropping_cpu[0]
    )
    return figures, bound, notes


# --- codec and storage (in this process) -----------------------------------------------------------------


def run_codec(plan: Plan, sheet: Sheet) -> list[Figure]:
    from exactly.bench import codec

    result = codec.measure(plan.codec_repeat, plan.codec_min_time)
    sheet.add("produce_decode_us", (s * 1e6 for s in result.produce_decode), "us")
    sheet.add("fetch_encode_us", (s * 1e6 for s in result.fetch_encode), "us")
    figures = [
        figure(
            "codec.produce_decode_us",
            "Produce v9 decode, 6 x 64 KiB (target <= 15)",
            sheet.median("produce_decode_us"),
            "us CPU",
            sheet,
        ),
        figure(
            "codec.fetch_encode_us",
            "Fetch v12 encode, 6 x 1 MiB (target <= 20)",
            sheet.median("fetch_encode_us"),
            "us CPU",
            sheet,
        ),
    ]
    for nominal, (size, samples) in zip(("64k", "1m"), result.crc, strict=True):
        series = f"crc_{nominal}_mb_s"
        sheet.add(series, (size / s / MB for s in samples), "MB/s")
        label = f"CRC-32C verify, {size:,} B batches (target >= 1000)"
        figures.append(figure(f"codec.{series}", label, sheet.median(series), "MB/s", sheet))
    return figures


def run_storage(plan: Plan, sheet: Sheet, bounds: BoundFigures) -> list[Figure]:
    from exactly.bench import storage

    figures = []
    root = Path(tempfile.mkdtemp(prefix="exactly-bench-storage-"))
    try:
        cases = storage.measure_appends(root, plan.storage_total_mib, plan.storage_runs)
        reads = storage.measure_reads_and_recovery(root, plan.storage_recovery_mib, plan.storage_runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for case in cases:
        name = f"append_{case.batch_bytes // 1024}k_fsync_{'on' if case.fsync else 'off'}"
        sheet.add(f"{name}_raw_mb_s", (case.total_bytes / s / MB for s in case.raw_seconds), "MB/s")
        sheet.add(f"{name}_log_mb_s", (case.total_bytes / s / MB for s in case.log_seconds), "MB/s")
        log, raw = sheet.median(f"{name}_log_mb_s"), sheet.median(f"{name}_raw_mb_s")
        versus = times(log[0], raw[0], "raw write, same run")
        if case.fsync and case.batch_bytes >= 1 << 20:
            versus += "; " + times(log[0], bounds.seq_write_mb_s, "seq-write burst")
        label = (
            f"PartitionLog append, {case.batch_bytes // 1024} KiB batches, "
            f"{'fsync after each' if case.fsync else 'no fsync'}"
        )
        figures.append(figure(f"storage.{name}_mb_s", label, log, "MB/s", sheet, versus))
    size = reads.log_bytes
    sheet.add("read_gb_s", (size / s / 1e9 for s in reads.read_seconds), "GB/s")
    sheet.add("recovery_unclean_s", reads.unclean_seconds, "s")
    sheet.add("recovery_clean_ms", (s * 1e3 for s in reads.clean_seconds), "ms")
    mib = size / (1 << 20)
    figures += [
        figure(
            "storage.read_gb_s",
            f"read {mib:.0f} MiB from page cache, 1 MiB fetches",
            sheet.median("read_gb_s"),
            "GB/s",
            sheet,
        ),
        figure(
            "storage.recovery_unclean_s",
            f"recovery of {mib:.0f} MiB, no clean-shutdown marker",
            sheet.median("recovery_unclean_s"),
            "s",
            sheet,
        ),
        figure(
            "storage.recovery_clean_ms",
            f"start-up of {mib:.0f} MiB after a clean shutdown",
            sheet.median("recovery_clean_ms"),
            "ms",
            sheet,
        ),
    ]
    return figures


# --- broker produce/consume (ours and any peer) -------------------------------------------------------------


def client_benchmark(
    plan: Plan,
    bootstrap: str,
    sheet: Sheet,
    bounds: BoundFigures,
    prefix: str,
    broker_pid: int | None,
    *,
    check_growth: bool = True,
) -> list[Figure]:
    """Paced latency, then `broker_rounds` timed rounds of produce then consume, each on its own topic
    (deleted after its round); the broker's CPU is read from `/proc/<broker_pid>/stat` (None: not).
    `check_growth`: see `rounds.produce_round`."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from exactly.bench import rounds

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = ["bench-paced"] + [f"bench-round-{r}" for r in range(plan.broker_rounds)]
    for topic, future in admin.create_topics(
        [NewTopic(t, broker_bench.PARTITIONS, 1) for t in topics]
    ).items():
        future.result(60)
        del topic
    # Latency first, on a quiet disk (as `exactly bench broker` does).
    paced = broker_bench.paced_latency(bootstrap, plan.paced_mb_s, plan.paced_seconds, "bench-paced")
    sheet.add("paced_latency_ms", (s * 1e3 for s in paced), "ms")
    for r in range(plan.broker_rounds):
        topic = f"bench-round-{r}"
        made = rounds.produce_round(
            bootstrap,
            topic,
            plan.broker_producers,
            plan.broker_warmup_s,
            plan.broker_seconds,
            broker_pid,
            check_growth=check_growth,
        )
        _add_round(sheet, "produce", made, r)
        records_s = made.timeline.measured_bytes / RECORD / made.timeline.seconds
        sheet.add("produce_records_s", [records_s], "1/s", run=r)
        sheet.add("produce_latency_ms", made.latencies_ms, "ms", run=r)
        read = rounds.consume_round(
            bootstrap, topic, plan.broker_consumers, plan.consume_warmup_s, plan.consume_seconds, broker_pid
        )
        if read.records == 0:
            raise RuntimeError(f"round {r}: the consumers read nothing of {made.records} records")
        _add_round(sheet, "consume", read, r)
        for future in admin.delete_topics([topic]).values():
            try:
                future.result(60)
            except Exception as e:  # noqa: BLE001 (a broker without DeleteTopics keeps the bytes)
                print(f"{prefix}: could not delete {topic}: {e}", flush=True)
    produce_mb = sheet.median("produce_mb_s")
    consume_mb = sheet.median("consume_mb_s")
    produce_cpu = sheet.median("produce_cpu_s_per_gb")
    consume_cpu = sheet.median("consume_cpu_s_per_gb")
    paced50 = sheet.pct("paced_latency_ms", 0.5)
    k = prefix
    return [
        figure(
            f"{k}.produce_mb_s",
            f"produce, {plan.broker_producers} producer process(es), acks=all, 1 KiB",
            produce_mb,
            "MB/s",
            sheet,
            times(produce_mb[0], bounds.loopback_mb_s, "loopback")
            + "; "
            + times(produce_mb[0], bounds.sustained_write_mb_s, "sustained-write bound")
            + "; "
            + times(produce_mb[0], bounds.seq_write_mb_s, "384 KiB burst"),
        ),
        figure(
            f"{k}.produce_cpu_s_per_gb",
            "broker CPU per GB produced (utime+stime)",
            produce_cpu,
            "s/GB",
            sheet,
            "target <= 1.0; "
            + times(produce_cpu[0], bounds.sustained_write_cpu_s_per_gb, "the sustained writer"),
        ),
        figure(
            f"{k}.produce_records_s", "produce records/s", sheet.median("produce_records_s"), "1/s", sheet
        ),
        figure(
            f"{k}.produce_latency_p50_ms",
            "delivery latency at full load, p50",
            sheet.pct("produce_latency_ms", 0.5),
            "ms",
            sheet,
        ),
        figure(
            f"{k}.produce_latency_p99_ms",
            "delivery latency at full load, p99",
            sheet.pct("produce_latency_ms", 0.99),
            "ms",
            sheet,
        ),
        figure(
            f"{k}.paced_latency_p50_ms",
            f"delivery latency at {plan.paced_mb_s:g} MB/s offered, p50",
            paced50,
            "ms",
            sheet,
            times(paced50[0], bounds.fsync_p50_ms, "fsync p50"),
        ),
        figure(
            f"{k}.paced_latency_p99_ms",
            f"delivery latency at {plan.paced_mb_s:g} MB/s offered, p99",
            sheet.pct("paced_latency_ms", 0.99),
            "ms",
            sheet,
        ),
        figure(
            f"{k}.consume_mb_s",
            f"consume, {plan.broker_consumers} consumer process(es)",
            consume_mb,
            "MB/s",
            sheet,
            times(consume_mb[0], bounds.loopback_mb_s, "loopback"),
        ),
        figure(
            f"{k}.consume_cpu_s_per_gb",
            "broker CPU per GB read (utime+stime)",
            consume_cpu,
            "s/GB",
            sheet,
            "target <= 0.3",
        ),
    ]


RECORD = broker_bench.RECORD_SIZE


def _add_round(sheet: Sheet, kind: str, done: TimedRound, r: int) -> None:
    """A timed round's rows: its MB/s and CPU per GB (one each), its per-second MB/s and broker cores."""
    sheet.add(f"{kind}_mb_s", [done.mb_s], "MB/s", run=r)
    sheet.add(f"{kind}_cpu_s_per_gb", [done.cpu_s_per_gb], "s/GB", run=r)
    sheet.add_indexed(f"{kind}_window_mb_s", done.timeline.per_second(), "MB/s", run=r)
    sheet.add_indexed(f"{kind}_broker_cores", done.cores_per_second(), "cores", run=r)


def run_broker(
    plan: Plan, work: Path, sheet: Sheet, bounds: BoundFigures, prefix: str = "broker", *settings: str
) -> tuple[list[Figure], list[str]]:
    """The client benchmark against a broker of its own (`settings`: broker key=value lines)."""
    from exactly.testing.processes import BrokerProcess

    (work / prefix).mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(work / prefix / "data", *settings).start()
    try:
        assert broker.proc is not None
        figures = client_benchmark(plan, broker.bootstrap, sheet, bounds, prefix, broker.proc.pid)
        rss = broker_bench._peak_rss_mb(broker.proc.pid)
    finally:
        broker.stop(60)
    sheet.add("broker_peak_rss_mb", [rss], "MB")
    figures.append(
        figure(
            f"{prefix}.peak_rss_mb",
            "broker peak RSS (VmHWM)",
            sheet.median("broker_peak_rss_mb"),
            "MB",
            sheet,
        )
    )
    return figures, client_notes(plan)


def run_drop_behind(
    plan: Plan, work: Path, sheet: Sheet, bounds: BoundFigures
) -> tuple[list[Figure], list[str]]:
    """The broker section again, its broker dropping the pages behind its writes, compared with the
    drop-behind writer."""
    setting = f"exactly.log.drop.behind.bytes={DROP_BEHIND_WINDOW}"
    figures, _ = run_broker(plan, work, sheet, bounds.dropping_behind(), "dropbehind", setting)
    return figures, [
        f"The broker section's benchmark against a broker started with `{setting}`: after each fsync of a "
        "segment it drops what lies more than 64 MiB behind the segment's end from the page cache "
        '(docs/storage.md). Its "sustained-write bound" is the drop-behind writer of the bounds section. '
        "A consume round's first pass over a topic reads what was dropped from the disk; the passes after "
        "it read from the page cache.",
    ]


def client_notes(plan: Plan) -> list[str]:
    return [
        f"{plan.broker_rounds} rounds, each on a new topic of 6 partitions: {plan.broker_producers} producer "
        f"process(es) of 1 KiB records (idempotent, acks=all, linger.ms=5, fsync before ack) for "
        f"{plan.broker_warmup_s} s of warm-up then {plan.broker_seconds} s measured; then "
        f"{plan.broker_consumers} consumer process(es) reading the topic over and over from offset 0 for "
        f"{plan.consume_warmup_s} s of warm-up then {plan.consume_seconds} s measured. MB/s counts the bytes "
        "acknowledged (produce) or received (consume) in the measured seconds, per epoch second "
        "(`*_window_mb_s`, index = second since the round began, warm-up included). The broker's CPU is "
        "utime+stime of its process from `/proc/<pid>/stat`, sampled every second (`*_broker_cores`); "
        "CPU per GB = its CPU over the measured seconds / the GB moved in them. Produce: one record in "
        f"{SAMPLE_EVERY} has a delivery report, which gives its latency (measured seconds only) "
        f"and counts those {SAMPLE_EVERY} records as acknowledged (a Python call per record would "
        "cost the producers, on the broker's cores, ~10 % of the throughput); against exactly, the "
        "topic must have grown by every record acknowledged. Paced: every record timed. The spread "
        "column gives min to max over the rounds and ± half that range over the median.",
    ]


# --- transactions, groups, spark --------------------------------------------------------------------------


def run_txn(plan: Plan, sheet: Sheet, bounds: BoundFigures) -> list[Figure]:
    from exactly.bench import txn

    _report, samples = txn.measure(list(plan.txn_argv))
    sheet.add(
        "idempotent_mb_s",
        (r * broker_bench.RECORD_SIZE / MB for r in samples.idempotent_rounds_records_s),
        "MB/s",
    )
    sheet.add(
        "transactional_mb_s",
        (r * broker_bench.RECORD_SIZE / MB for r in samples.transactional_rounds_records_s),
        "MB/s",
    )
    for name, runs in (
        ("commit_ms", samples.commit),
        ("transaction_ms", samples.transaction),
        ("end_txn_ms", samples.end_txn),
        ("visibility_ms", samples.visibility),
        ("ids_end_txn_ms", samples.ids_end_txn),
        ("ids_transaction_ms", samples.ids_transaction),
    ):
        for r, values in enumerate(runs):
            sheet.add(name, (s * 1e3 for s in values), "ms", run=r)
    sheet.add("ids_commits_s", samples.ids_commits_s, "1/s")
    for name, values in (
        ("idempotent_cpu_s_per_gb", samples.idempotent_cpu_s_per_gb),
        ("transactional_cpu_s_per_gb", samples.transactional_cpu_s_per_gb),
    ):
        sheet.add(name, values, "s/GB")
    for name, values in (
        ("transactional_cpu_ms_per_commit", samples.transactional_cpu_ms_per_commit),
        ("latency_cpu_ms_per_commit", samples.latency_cpu_ms_per_commit),
        ("visibility_cpu_ms_per_commit", samples.visibility_cpu_ms_per_commit),
        ("ids_cpu_ms_per_commit", samples.ids_cpu_ms_per_commit),
    ):
        sheet.add(name, values, "ms")
    idem, tx = sheet.median("idempotent_mb_s"), sheet.median("transactional_mb_s")
    commit50 = sheet.median_of_runs("commit_ms", 0.5)
    end50 = sheet.median_of_runs("end_txn_ms", 0.5)
    one = sheet.values("transaction_ms")
    serial = (1e3 / statistics.fmean(one) if one else math.nan, "1000 / mean of all `transaction_ms`")
    ids = sheet.median("ids_commits_s")
    fsyncs_s = 1e3 / bounds.fsync_p50_ms
    n_ids = plan.txn_argv[plan.txn_argv.index("--ids") + 1]
    cpu = [
        figure(
            "txn.idempotent_cpu_s_per_gb",
            "broker CPU per GB, idempotent produce",
            sheet.median("idempotent_cpu_s_per_gb"),
            "s/GB",
            sheet,
        ),
        figure(
            "txn.transactional_cpu_s_per_gb",
            "broker CPU per GB, transactional produce",
            sheet.median("transactional_cpu_s_per_gb"),
            "s/GB",
            sheet,
        ),
        figure(
            "txn.transactional_cpu_ms_per_commit",
            "broker CPU per commit, transactional produce (each commit: 100 ms of records)",
            sheet.median("transactional_cpu_ms_per_commit"),
            "ms",
            sheet,
        ),
        figure(
            "txn.latency_cpu_ms_per_commit",
            "broker CPU per one-record, one-partition transaction",
            sheet.median("latency_cpu_ms_per_commit"),
            "ms",
            sheet,
            "target <= 0.3",
        ),
        figure(
            "txn.visibility_cpu_ms_per_commit",
            "broker CPU per commit, visibility runs (with a read_committed consumer)",
            sheet.median("visibility_cpu_ms_per_commit"),
            "ms",
            sheet,
        ),
        figure(
            "txn.ids_cpu_ms_per_commit",
            f"broker CPU per commit, {n_ids} ids",
            sheet.median("ids_cpu_ms_per_commit"),
            "ms",
            sheet,
        ),
    ]
    main = [
        figure("txn.idempotent_mb_s", "idempotent produce (1 producer)", idem, "MB/s", sheet),
        figure(
            "txn.transactional_mb_s",
            "transactional produce, commit every 100 ms",
            tx,
            "MB/s",
            sheet,
            times(tx[0], idem[0], "idempotent"),
        ),
        figure(
            "txn.commit_p50_ms",
            "one-record transaction: commit_transaction() p50",
            commit50,
            "ms",
            sheet,
            times(commit50[0], bounds.fsync_p50_ms, "fsync p50"),
        ),
        figure(
            "txn.commit_p99_ms",
            "one-record transaction: commit_transaction() p99",
            sheet.median_of_runs("commit_ms", 0.99),
            "ms",
            sheet,
        ),
        figure(
            "txn.end_txn_p50_ms",
            "commit_transaction() after flush() (EndTxn alone) p50",
            end50,
            "ms",
            sheet,
            times(end50[0], bounds.fsync_p50_ms, "fsync p50"),
        ),
        figure(
            "txn.end_txn_p99_ms",
            "commit_transaction() after flush() (EndTxn alone) p99",
            sheet.median_of_runs("end_txn_ms", 0.99),
            "ms",
            sheet,
        ),
        figure(
            "txn.serial_commits_s",
            "one producer, one-record transactions back to back",
            serial,
            "1/s",
            sheet,
            times(serial[0], fsyncs_s, "fsyncs/s bound"),
        ),
        figure(
            "txn.visibility_p50_ms",
            "commit returned -> read_committed consumer has it, p50",
            sheet.median_of_runs("visibility_ms", 0.5),
            "ms",
            sheet,
        ),
        figure(
            "txn.visibility_p99_ms",
            "commit returned -> read_committed consumer has it, p99",
            sheet.median_of_runs("visibility_ms", 0.99),
            "ms",
            sheet,
        ),
        figure(
            "txn.ids_commits_s",
            f"{n_ids} transactional ids committing at once",
            ids,
            "1/s",
            sheet,
            times(ids[0], fsyncs_s, "fsyncs/s bound"),
        ),
        figure(
            "txn.ids_end_txn_p50_ms",
            f"EndTxn p50 with {n_ids} ids",
            sheet.median_of_runs("ids_end_txn_ms", 0.5),
            "ms",
            sheet,
        ),
        figure(
            "txn.ids_end_txn_p99_ms",
            f"EndTxn p99 with {n_ids} ids",
            sheet.median_of_runs("ids_end_txn_ms", 0.99),
            "ms",
            sheet,
        ),
    ]
    return [*main, *cpu]


def run_groups(plan: Plan, sheet: Sheet, bounds: BoundFigures) -> list[Figure]:
    from exactly.bench import groups

    result = groups.measure(
        list(plan.group_members),
        plan.group_rounds,
        100,
        plan.group_committers,
        plan.group_commit_seconds,
        plan.group_load_records,
        plan.group_skip_clients,
    )
    figures = []
    for kind, rebalances in (("protocol", result.protocol_rebalances), ("client", result.client_rebalances)):
        for members, latencies in rebalances:
            series = f"rebalance_{kind}_{members}_ms"
            sheet.add(series, (s * 1e3 for s in latencies), "ms")
            who = "exactly's codecs" if kind == "protocol" else "confluent-kafka"
            label = f"rebalance, {members} + 1 members ({who}, 100 ms heartbeats)"
            figures.append(figure(f"groups.{series}", label, sheet.median(series), "ms", sheet))
    sheet.add("offset_commit_requests_s", [result.commit_requests_s], "1/s")
    sheet.add("offset_commit_ms", (s * 1e3 for s in result.commit_latencies), "ms")
    sheet.add("offset_commit_paced_ms", (s * 1e3 for s in result.paced_latencies), "ms")
    p50 = sheet.pct("offset_commit_ms", 0.5)
    paced50 = sheet.pct("offset_commit_paced_ms", 0.5)
    rate, committers = result.paced_rate, result.committers
    offered = f"{rate * committers:,.0f}/s offered ({committers} x {rate:.0f}/s)"
    figures += [
        figure(
            "groups.offset_commit_requests_s",
            f"OffsetCommit, {result.committers} connections",
            sheet.median("offset_commit_requests_s"),
            "1/s",
            sheet,
        ),
        figure(
            "groups.offset_commit_p50_ms",
            f"OffsetCommit latency p50, {committers} connections back to back (= connections / requests/s)",
            p50,
            "ms",
            sheet,
            times(p50[0], bounds.fsync_p50_ms, "fsync p50"),
        ),
        figure(
            "groups.offset_commit_p99_ms",
            "OffsetCommit latency p99, back to back",
            sheet.pct("offset_commit_ms", 0.99),
            "ms",
            sheet,
        ),
        figure(
            "groups.offset_commit_paced_p50_ms",
            f"OffsetCommit latency p50 at {offered}, from when due",
            paced50,
            "ms",
            sheet,
            "target <= 1; " + times(paced50[0], bounds.fsync_p50_ms, "fsync p50"),
        ),
        figure(
            "groups.offset_commit_paced_p99_ms",
            f"OffsetCommit latency p99 at {offered}",
            sheet.pct("offset_commit_paced_ms", 0.99),
            "ms",
            sheet,
        ),
    ]
    for i, load in enumerate(result.loads):
        sheet.add("load_records_s", [load.records / load.seconds], "1/s", run=i)
        label = f"coordinator load, {load.records:,} records, {load.label}"
        stat = (sheet.values("load_records_s", run=i)[0], f"`load_records_s` run {i}")
        figures.append(figure(f"groups.load_{i}_records_s", label, stat, "records/s", sheet))
    return figures


def cluster_available() -> str | None:
    """None when the cluster benchmark can run (Java and Debian's ZooKeeper), else why not."""
    from exactly.testing.zookeeper import ZooKeeperNotInstalled, java_executable, zookeeper_classpath

    try:
        java_executable()
        zookeeper_classpath()
    except ZooKeeperNotInstalled as e:
        return str(e)
    return None


def run_cluster(plan: Plan, sheet: Sheet) -> tuple[list[Figure], list[str]]:
    from exactly.bench import cluster

    options, _out = cluster.parse_options(list(plan.cluster_argv))
    with tempfile.TemporaryDirectory(prefix="exactly-bench-cluster-") as tmp:
        result = cluster.measure(options, Path(tmp))
    cluster.print_table(result)
    cluster.fill_sheet(result, sheet)
    return cluster.figures(result, sheet), cluster.notes(result)


def spark_available() -> str | None:
    """None when the Spark benchmark can run, else why not."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (`pip install '.[spark]'`)"
    if shutil.which("java") is None:
        return "no java on PATH (Spark needs Java 17)"
    return None


def run_spark(plan: Plan, sheet: Sheet, bounds: BoundFigures) -> list[Figure]:
    from exactly.bench import spark

    with tempfile.TemporaryDirectory(prefix="exactly-bench-spark-") as tmp:
        result = spark.run_samples(
            plan.spark_size_mib,
            plan.spark_rounds,
            plan.spark_seconds,
            plan.spark_read_runs,
            Path(tmp),
            plan.spark_warmup_seconds,
        )
    for guarantee in (spark.EXACTLY_ONCE, spark.AT_LEAST_ONCE):
        rounds = [r for r in result.streams if r.guarantee == guarantee]
        name = guarantee.replace("-", "_")
        sheet.add(f"stream_{name}_records_s", (r.records_per_s for r in rounds), "records/s")
        sheet.add(f"stream_{name}_batch_s", (r.batch_s for r in rounds), "s")
    sheet.add("read_spark_mb_s", (r.mb_per_s for r in result.spark_reads), "MB/s")
    sheet.add("read_consumer_mb_s", (r.mb_per_s for r in result.consumer_reads), "MB/s")
    sheet.add("read_spark_cold_s", [result.cold_read.seconds], "s")
    sheet.add("commit_to_visible_ms", result.latency_ms, "ms")
    eo, alo = sheet.median("stream_exactly_once_records_s"), sheet.median("stream_at_least_once_records_s")
    sr, cr = sheet.median("read_spark_mb_s"), sheet.median("read_consumer_mb_s")
    return [
        figure(
            "spark.stream_exactly_once_records_s",
            "streaming, exactly-once sink, 1-s triggers",
            eo,
            "records/s",
            sheet,
            times(eo[0], alo[0], "at-least-once sink"),
        ),
        figure(
            "spark.stream_at_least_once_records_s",
            "streaming, at-least-once sink, 1-s triggers",
            alo,
            "records/s",
            sheet,
        ),
        figure(
            "spark.read_spark_mb_s",
            "Spark batch read (local[2])",
            sr,
            "MB/s",
            sheet,
            times(sr[0], cr[0], "one consumer") + "; " + times(sr[0], bounds.loopback_mb_s, "loopback"),
        ),
        figure("spark.read_consumer_mb_s", "one confluent-kafka consumer, same topic", cr, "MB/s", sheet),
        figure(
            "spark.read_spark_cold_s",
            "the session's first Spark batch read (workers start; not in the read's median)",
            sheet.median("read_spark_cold_s"),
            "s",
            sheet,
        ),
        figure(
            "spark.commit_to_visible_p50_ms",
            "input commit -> aggregate visible, p50",
            sheet.pct("commit_to_visible_ms", 0.5),
            "ms",
            sheet,
        ),
        figure(
            "spark.commit_to_visible_p99_ms",
            "input commit -> aggregate visible, p99",
            sheet.pct("commit_to_visible_ms", 0.99),
            "ms",
            sheet,
        ),
    ]


def spark_section(plan: Plan, sheet: Sheet, bounds: BoundFigures) -> tuple[list[Figure], list[str]]:
    figures = run_spark(plan, sheet, bounds)
    return figures, spark_notes(
        sheet.median("stream_exactly_once_batch_s")[0], sheet.median("stream_at_least_once_batch_s")[0]
    )


def spark_notes(exactly_once_batch_s: float, at_least_once_batch_s: float) -> list[str]:
    """Why the report's Spark figures are `exactly bench spark`'s, and whether the trigger set the pace."""
    notes = [
        "The same run as `exactly bench spark` with its defaults (the command above): same input size, "
        "so the same maxOffsetsPerTrigger (min(200,000, records / 8)), the same rounds and an unmeasured "
        "warm-up round first. The two used to disagree (0.74 x here, 1.10 x there) because this report "
        "ran 256 MiB (32,768 records per trigger: the at-least-once sink finished its batches in 0.6 s "
        "and then waited for the 1-s trigger) in 2 rounds with no warm-up (its first, cold exactly-once "
        "round ran 1.58-s batches, its second 0.98 s)."
    ]
    paced = [
        name
        for name, batch in (("exactly-once", exactly_once_batch_s), ("at-least-once", at_least_once_batch_s))
        if batch < 1.0
    ]
    if paced:
        notes.append(
            f"Median batch under the 1-s trigger for the {' and '.join(paced)} sink: it waited for the "
            "trigger, so its records/s is the trigger's pace (records per trigger / 1 s), a lower bound "
            "of what it can do; the exactly / at-least-once ratio is then off by as much."
        )
    return notes


def latency_series() -> tuple[tuple[str, str, str], ...]:
    """(label, sheet, series) of every latency the report's percentile table and plot show."""
    return (
        ("produce, paced (broker)", "broker", "paced_latency_ms"),
        ("produce, full load (broker)", "broker", "produce_latency_ms"),
        ("txn commit_transaction()", "txn", "commit_ms"),
        ("txn EndTxn after flush()", "txn", "end_txn_ms"),
        ("txn visibility", "txn", "visibility_ms"),
        ("txn EndTxn, many ids", "txn", "ids_end_txn_ms"),
        ("OffsetCommit (groups)", "groups", "offset_commit_ms"),
        ("spark commit -> visible", "spark", "commit_to_visible_ms"),
    )


__all__ = ["BoundFigures", "Plan", "percentile"]
