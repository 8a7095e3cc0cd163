// One oij case through Flink DataStream's intervalJoin under the restart protocol, for
// `oij adapter flink-ds --restart-protocol` (oij/flink/recovery.py, which starts this JVM once per incarnation).
//
// Compiled with javac against PyFlink's own jars and OijDataStreamCase.class (whose watermark generators and
// input split it reuses, so the join's semantics are the flink-ds adapter's); run with java.
// Usage: OijDataStreamRestart STATE_DIR PACE_MS SINK FAIL_AFTER [SAVEPOINT_EVERY]
//   SINK: "two-phase" (a TwoPhaseCommitSinkFunction: rows staged per checkpoint in operator state, written to
//         STATE_DIR/sink/<checkpoint id> when the checkpoint completes) or "direct" (rows appended to
//         STATE_DIR/sink/direct.log as they come: no transaction)
//   FAIL_AFTER: 0, or K: the source throws once (the marker file STATE_DIR/failed-once) after emitting event K,
//         and Flink's own restart strategy restores the job from its last completed checkpoint in this JVM
//   SAVEPOINT_EVERY: 0 (the default), or K: after every K-th event (its number a multiple of K) the source
//         stops emitting and asks for a stop: the job is stopped with a savepoint (Flink's stop-with-savepoint,
//         no drain: the synchronous savepoint takes the next checkpoint id, the two-phase sink's open
//         transaction is sealed in it and committed on its completion, as for a checkpoint; no final
//         watermark), and a new job (the next job id) is submitted to the same MiniCluster, restored from that
//         savepoint. The jobs of one JVM run one at a time in one MiniCluster that this class starts itself.
//
// Files in STATE_DIR (written by the Python side unless said otherwise):
//   head.txt     the case's head line, as OijDataStreamCase reads it (bounds, lateness, channels)
//   input.log    one line per event of the case, in OijDataStreamCase's format ("0 side id ts key" or
//                "1 channel ts"), appended as the events arrive; then "E", the end of the input. Only complete
//                lines (ending in a newline) are read.
//   ckpt/        Flink's checkpoints (this JVM): ckpt/<job id>/chk-<id>/_metadata, retained when the JVM dies
//                (a job stopped with a savepoint finishes, and Flink removes its checkpoints then)
//   savepoints/  SAVEPOINT_EVERY's savepoints (this JVM): savepoints/savepoint-<...>/_metadata
//   sink/        the two-phase sink's commits (this JVM): <checkpoint id, 20 digits>.txt, written once each
//                (temp file, fsync, atomic rename): the line "K k" (the source's offset at that checkpoint: the
//                events through k are in it; "K k E" for the job's last, sealed after the end of the data) then
//                the rows ("P base probe", "L id"); with SINK direct, the one
//                file direct.log, a row per line as it came
//   failed-once  fail-after's marker (this JVM)
//
// Data flow: a replayable source reads input.log from its checkpointed offset (ListState: the number of events
// emitted), waiting for more lines until "E". Each event is emitted, PACE_MS after the previous one, under the
// checkpoint lock together with an offset mark (kind 2) so that a checkpoint never splits an event. The events go
// through OijDataStreamCase.input (the two inputs with their watermarks) into base.keyBy(key).intervalJoin(
// probe.keyBy(key)) with both late side outputs, as in OijDataStreamCase; the offset marks go straight to the
// sink ("K j"), so the sink knows, at each checkpoint barrier, the offset k of the source's snapshot of the same
// checkpoint (barriers are aligned: every record emitted before the source's snapshot reaches the sink before
// the barrier). Checkpoints every 100 ms, file storage under STATE_DIR/ckpt, retained on cancellation (and on a
// kill); at start the job restores from the snapshot with the highest checkpoint id (read from its _metadata;
// one that does not load, torn by a kill, is skipped) among ckpt/*/chk-* and savepoints/*, if any.
//
// stdout (the protocol with oij/flink/recovery.py; whatever else prints to System.out goes to stderr):
//   "C id"           two-phase: sink/<id>.txt (and every earlier one) is committed
//   "R"              direct: a row was appended to sink/direct.log
//   "C id k"         direct: checkpoint id completed, the source's offset in it being k
//   "#DONE"          the job finished (the input ended, the final checkpoint committed); then exit 0

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.TreeMap;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.InputStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.base.VoidSerializer;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.PipelineOptionsInternal;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.configuration.WebOptions;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.streaming.api.functions.sink.legacy.RichSinkFunction;
import org.apache.flink.streaming.api.functions.sink.legacy.TwoPhaseCommitSinkFunction;
import org.apache.flink.streaming.api.functions.source.legacy.RichSourceFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

public class OijDataStreamRestart {
    /** The one job id of every incarnation, so that all checkpoints live under STATE_DIR/ckpt/JOB_ID. */
    static final String JOB_ID = "0000000000000000000000000000001a";
    static final long CHECKPOINT_MS = 100;
    /** A test hook (0 unless the environment variable OIJ_FLINK_STOP_COMMIT_PAUSE_MS says otherwise): the sink
     *  waits this long before committing an epoch sealed while a stop-with-savepoint is under way, so that a
     *  test's SIGKILL lands inside the stop, after the savepoint's _metadata and before its commit, whatever the
     *  machine's load (tests/flink/test_flink_restart.py). */
    static final long STOP_COMMIT_PAUSE_MS = Long.parseLong(
        System.getenv().getOrDefault("OIJ_FLINK_STOP_COMMIT_PAUSE_MS", "0"));

    /** The protocol's stdout (the real one; System.out is sent to stderr). */
    static PrintStream proto;

    static synchronized void say(String line) {
        proto.print(line + "\n");
        proto.flush();
    }

    public static void main(String[] args) throws Exception {
        proto = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Path state = Paths.get(args[0]).toAbsolutePath();
        long pace = Long.parseLong(args[1]);
        String sink = args[2];
        long failAfter = Long.parseLong(args[3]);
        long savepointEvery = args.length > 4 ? Long.parseLong(args[4]) : 0;
        long[] head = OijDataStreamCase.parse(Files.readAllLines(state.resolve("head.txt")).get(0));

        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_PORT, "0");
        conf.set(CoreOptions.TMP_DIRS, state.resolve("tmp").toString());
        conf.set(WebOptions.TMP_DIR, state.resolve("tmp").toString());
        conf.set(WebOptions.UPLOAD_DIR, state.resolve("tmp").resolve("web-upload").toString());
        conf.set(PipelineOptionsInternal.PIPELINE_FIXED_JOB_ID, JOB_ID);
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(CHECKPOINT_MS));
        conf.set(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS, Duration.ZERO);
        conf.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, Integer.MAX_VALUE);
        conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, state.resolve("ckpt").toUri().toString());
        conf.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                 ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 3);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ZERO);
        String restore = latestSnapshot(state);
        if (savepointEvery > 0) {
            runWithSavepoints(conf, head, state, pace, sink, failAfter, savepointEvery, restore);
            say("#DONE");
            return;
        }
        if (restore != null) {
            conf.set(StateRecoveryOptions.SAVEPOINT_PATH, restore);
            System.err.println("oij: restoring from " + restore);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        build(env, head, state, pace, sink, failAfter, 0);
        env.execute("oij-flink-ds-restart");
        say("#DONE");
    }

    /** The stop the source asks for (SAVEPOINT_EVERY): the event count it stopped at, or -1. The source and the
     *  driver share it: the MiniCluster runs the tasks in this JVM, and the job has no jars of its own, so its
     *  classes are this JVM's. */
    static final class Stop {
        static volatile long requested = -1;
    }

    /** SAVEPOINT_EVERY: one MiniCluster, a job at a time; each job but the last is stopped with a savepoint when
     *  its source asks, and the next one is restored from that savepoint. */
    static void runWithSavepoints(Configuration conf, long[] head, Path state, long pace, String sink,
                                  long failAfter, long every, String restore) throws Exception {
        conf.set(TaskManagerOptions.NUM_TASK_SLOTS, 1);
        MiniClusterConfiguration mcConf = new MiniClusterConfiguration.Builder()
            .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(1).build();
        String savepoints = state.resolve("savepoints").toUri().toString();
        try (MiniCluster cluster = new MiniCluster(mcConf)) {
            cluster.start();
            for (long seq = 0; ; seq++) {
                JobID id = JobID.fromHexString(String.format("%016x%016x", seq, 0x1aL));
                StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
                build(env, head, state, pace, sink, failAfter, every);
                JobGraph job = env.getStreamGraph().getJobGraph(OijDataStreamRestart.class.getClassLoader(), id);
                job.setSavepointRestoreSettings(restore == null ? SavepointRestoreSettings.none()
                                                : SavepointRestoreSettings.forPath(restore));
                Stop.requested = -1;
                if (restore != null) {
                    System.err.println("oij: restoring from " + restore);
                }
                cluster.submitJob(job).get();
                System.err.println("oij: job " + id + " submitted");
                CompletableFuture<JobResult> result = cluster.requestJobResult(id);
                String savepoint = null;
                while (savepoint == null) {
                    try {
                        result.get(10, TimeUnit.MILLISECONDS);
                        break;
                    } catch (TimeoutException e) {
                        // still running
                    }
                    long at = Stop.requested;
                    if (at < 0) {
                        continue;
                    }
                    System.err.println("oij: stop-with-savepoint of job " + id + " at event " + at);
                    try {
                        savepoint = cluster.stopWithSavepoint(id, savepoints, false, SavepointFormatType.CANONICAL)
                            .get();
                    } catch (ExecutionException e) {
                        // e.g. not every task is running yet (a job just restored), or a restart of the job in
                        // progress: the source stays paused at the event it asked at, and the stop is tried again
                        System.err.println("oij: stop-with-savepoint failed, tried again: " + e.getCause());
                        Thread.sleep(20);
                    }
                }
                JobResult r = result.get();
                if (!r.isSuccess()) {
                    r.toJobExecutionResult(OijDataStreamRestart.class.getClassLoader());  // throws its failure
                    throw new IllegalStateException("job " + id + " ended " + r.getJobStatus());
                }
                if (savepoint == null) {
                    return;  // the input ended: the job finished (its final checkpoint committed)
                }
                System.err.println("oij: job " + id + " stopped with savepoint " + savepoint + " (checkpoint id "
                                   + snapshotId(Paths.get(java.net.URI.create(savepoint))) + ")");
                restore = savepoint;
            }
        }
    }

    /** The snapshot to restore: among the checkpoints ckpt/<job>/chk-<id> and the savepoints savepoints/*, the
     *  one with the highest checkpoint id whose _metadata loads (a kill can leave one torn or missing); null
     *  when there is none. A savepoint takes its id from the same counter as the checkpoints. */
    static String latestSnapshot(Path state) throws IOException {
        List<Path> candidates = new ArrayList<>();
        Path ckpt = state.resolve("ckpt");
        if (Files.isDirectory(ckpt)) {
            try (DirectoryStream<Path> jobs = Files.newDirectoryStream(ckpt)) {
                for (Path job : jobs) {
                    if (Files.isDirectory(job)) {
                        try (DirectoryStream<Path> chks = Files.newDirectoryStream(job, "chk-*")) {
                            chks.forEach(candidates::add);
                        }
                    }
                }
            }
        }
        Path sps = state.resolve("savepoints");
        if (Files.isDirectory(sps)) {
            try (DirectoryStream<Path> all = Files.newDirectoryStream(sps, "savepoint-*")) {
                all.forEach(candidates::add);
            }
        }
        long best = -1;
        Path bestDir = null;
        for (Path dir : candidates) {
            long id = snapshotId(dir);
            if (id > best) {
                best = id;
                bestDir = dir;
            }
        }
        return bestDir == null ? null : bestDir.toString();
    }

    /** The checkpoint id in dir/_metadata, or -1 when it is missing or does not load. */
    static long snapshotId(Path dir) {
        Path meta = dir.resolve("_metadata");
        if (!Files.isRegularFile(meta)) {
            return -1;
        }
        try (InputStream in = new BufferedInputStream(Files.newInputStream(meta))) {
            return Checkpoints.loadCheckpointMetadata(new DataInputStream(in),
                OijDataStreamRestart.class.getClassLoader(), dir.toString()).getCheckpointId();
        } catch (IOException | RuntimeException e) {
            System.err.println("oij: skipping " + dir + ": its _metadata does not load: " + e);
            return -1;
        }
    }

    static void build(StreamExecutionEnvironment env, long[] head, Path state, long pace, String sink,
                      long failAfter, long savepointEvery) {
        long lower = head[0], upper = head[1], lateness = head[4];
        boolean lowerExcl = head[2] != 0, upperExcl = head[3] != 0;
        int channels = (int) head[5];
        env.setParallelism(1);
        env.setBufferTimeout(0);
        DataStream<long[]> all = env.addSource(
                new LogSource(state.toString(), pace, channels, failAfter, savepointEvery), "oij-input-log",
                OijDataStreamCase.LONGS)
            .uid("oij-input-log");
        KeyedStream<long[], Long> base = OijDataStreamCase.input(all, 0, lateness, channels).keyBy(e -> e[4], Types.LONG);
        KeyedStream<long[], Long> probe = OijDataStreamCase.input(all, 1, lateness, channels).keyBy(e -> e[4], Types.LONG);
        OutputTag<long[]> lateBase = new OutputTag<>("late-base", OijDataStreamCase.LONGS);
        OutputTag<long[]> lateProbe = new OutputTag<>("late-probe", OijDataStreamCase.LONGS);
        KeyedStream.IntervalJoined<long[], long[], Long> joined = base.intervalJoin(probe)
            .between(Duration.ofMillis(lower), Duration.ofMillis(upper))
            .sideOutputLeftLateData(lateBase)
            .sideOutputRightLateData(lateProbe);
        if (lowerExcl) {
            joined = joined.lowerBoundExclusive();
        }
        if (upperExcl) {
            joined = joined.upperBoundExclusive();
        }
        SingleOutputStreamOperator<String> pairs = joined.process(new ProcessJoinFunction<long[], long[], String>() {
            @Override
            public void processElement(long[] a, long[] b, Context ctx, Collector<String> out) {
                out.collect("P " + a[2] + " " + b[2]);
            }
        }).uid("oij-interval-join");
        DataStream<String> late = pairs.getSideOutput(lateBase).union(pairs.getSideOutput(lateProbe))
            .map(e -> "L " + e[2]).returns(Types.STRING);
        DataStream<String> marks = all.filter(e -> e[0] == 2).returns(OijDataStreamCase.LONGS)
            .map(e -> "K " + e[2]).returns(Types.STRING);
        DataStream<String> rows = pairs.union(late, marks);
        if (sink.equals("direct")) {
            rows.addSink(new DirectSink(state.resolve("sink").toString())).uid("oij-sink").name("oij-direct-sink");
        } else {
            rows.addSink(new CommitSink(state.resolve("sink").toString())).uid("oij-sink").name("oij-two-phase-sink");
        }
    }

    /** input.log from the checkpointed offset (the number of events emitted), until its "E" line. */
    static final class LogSource extends RichSourceFunction<long[]> implements CheckpointedFunction {
        private final String dir;
        private final long pace;
        private final int channels;
        private final long failAfter;
        private final long savepointEvery;
        private transient ListState<Long> offsetState;
        private transient long offset;
        private volatile boolean running = true;

        LogSource(String dir, long pace, int channels, long failAfter, long savepointEvery) {
            this.dir = dir;
            this.pace = pace;
            this.channels = channels;
            this.failAfter = failAfter;
            this.savepointEvery = savepointEvery;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offsetState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offset", Types.LONG));
            offset = 0;
            for (Long o : offsetState.get()) {
                offset = Math.max(offset, o);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offsetState.update(Collections.singletonList(offset));
        }

        @Override
        public void run(SourceContext<long[]> ctx) throws Exception {
            Path log = Paths.get(dir, "input.log");
            try (RandomAccessFile in = new RandomAccessFile(log.toFile(), "r")) {
                LineReader lines = new LineReader(in);
                long seen = 0;
                while (running) {
                    String line = lines.next();
                    if (line == null) {
                        Thread.sleep(5);
                        continue;
                    }
                    if (line.equals("E")) {
                        return;  // the end of the input: Flink's final watermark, then the final checkpoint
                    }
                    seen++;
                    if (seen <= offset) {
                        continue;  // emitted before the checkpoint this job was restored from
                    }
                    List<long[]> elements = expand(line, seen);
                    Thread.sleep(pace);
                    synchronized (ctx.getCheckpointLock()) {
                        for (long[] e : elements) {
                            ctx.collect(e);
                        }
                        offset = seen;
                    }
                    if (failAfter > 0 && seen == failAfter) {
                        Path marker = Paths.get(dir, "failed-once");
                        if (!Files.exists(marker)) {
                            writeOnce(marker, "failed after event " + seen + "\n");
                            throw new RuntimeException("oij fail-after=" + failAfter + ": the source fails once");
                        }
                    }
                    if (savepointEvery > 0 && seen % savepointEvery == 0) {
                        // ask for a stop-with-savepoint and emit nothing more: the savepoint's offset is seen
                        // (its stop cancels this function; the driver tries it until it succeeds or the job ends)
                        Stop.requested = seen;
                        while (running && Stop.requested == seen) {
                            Thread.sleep(5);
                        }
                    }
                }
            }
        }

        /** An event's elements (as OijDataStreamCase.run makes them), then the offset mark {2, -1, j}. */
        private List<long[]> expand(String line, long j) {
            long[] f = OijDataStreamCase.parse(line);
            List<long[]> out = new ArrayList<>();
            if (f[0] == 0) {
                out.add(new long[] {0, f[1], f[2], f[3], f[4], 0});
            } else {
                int c = (int) f[1];
                for (int input = 0; input < 2; input++) {
                    if (channels == 1 || c % 2 == input) {
                        out.add(new long[] {1, input, 0, f[2], 0, c});
                    }
                }
            }
            out.add(new long[] {2, -1, j, 0, 0, 0});
            return out;
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /** The complete lines of a growing file, each once; null when no complete line is there yet. */
    static final class LineReader {
        private final RandomAccessFile in;
        private final StringBuilder partial = new StringBuilder();
        private final byte[] buf = new byte[8192];
        private final List<String> ready = new ArrayList<>();
        private int next = 0;

        LineReader(RandomAccessFile in) {
            this.in = in;
        }

        String next() throws IOException {
            if (next < ready.size()) {
                return ready.get(next++);
            }
            ready.clear();
            next = 0;
            int n = in.read(buf);
            if (n <= 0) {
                return null;
            }
            partial.append(new String(buf, 0, n, StandardCharsets.UTF_8));  // the log is ASCII
            int start = 0;
            for (int i = 0; i < partial.length(); i++) {
                if (partial.charAt(i) == '\n') {
                    ready.add(partial.substring(start, i));
                    start = i + 1;
                }
            }
            partial.delete(0, start);
            return next < ready.size() ? ready.get(next++) : null;
        }
    }

    /** A checkpoint's rows: the transaction of the two-phase sink, kept in operator state until committed. */
    public static final class Txn {
        public long epoch = -1;
        public long k = 0;
        public String rows = "";
        public boolean ended = false;  // sealed after the sink's finish: the job's last rows (the input ended)

        public Txn() {
        }

        @Override
        public String toString() {
            return "Txn(epoch " + epoch + ", k " + k + ")";
        }
    }

    /** Flink's TwoPhaseCommitSinkFunction: rows of a checkpoint go into its transaction; preCommit (at the
     *  checkpoint's snapshot) seals it with the checkpoint id and the source offset k; commit (on the checkpoint's
     *  completion, or on a restore from a checkpoint that holds it pending) writes sink/<id>.txt once. */
    static final class CommitSink extends TwoPhaseCommitSinkFunction<String, Txn, Void> {
        private final String dir;
        private transient ListState<Long> kState;
        private transient long k;
        private transient long snapshotting;

        CommitSink(String dir) {
            super(TypeInformation.of(Txn.class).createSerializer(new SerializerConfigImpl()), VoidSerializer.INSTANCE);
            this.dir = dir;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            Files.createDirectories(Paths.get(dir));
            kState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("k", Types.LONG));
            k = 0;
            for (Long v : kState.get()) {
                k = Math.max(k, v);
            }
            super.initializeState(ctx);  // commits the restored pending transactions (recoverAndCommit)
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            snapshotting = ctx.getCheckpointId();
            super.snapshotState(ctx);  // preCommit(current transaction), pending under this checkpoint id
            kState.update(Collections.singletonList(k));
        }

        @Override
        protected void invoke(Txn txn, String value, Context ctx) {
            if (value.startsWith("K ")) {
                k = Math.max(k, Long.parseLong(value.substring(2)));
            } else {
                txn.rows = txn.rows + value + "\n";
            }
        }

        @Override
        protected Txn beginTransaction() {
            return new Txn();
        }

        @Override
        protected void preCommit(Txn txn) {
            txn.epoch = snapshotting;
            txn.k = k;
        }

        @Override
        protected void commit(Txn txn) {
            try {
                if (STOP_COMMIT_PAUSE_MS > 0 && Stop.requested >= 0 && txn.k == Stop.requested) {
                    Thread.sleep(STOP_COMMIT_PAUSE_MS);
                }
                writeOnce(Paths.get(dir, String.format("%020d.txt", txn.epoch)),
                          "K " + txn.k + (txn.ended ? " E" : "") + "\n" + txn.rows);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted before a commit", e);
            }
            say("C " + txn.epoch);
        }

        /** The end of the data (the input ended, the final watermark passed): the open transaction is the job's
         *  last, and its file says so ("K k E"). Flink calls this from finish(), which a stop-with-savepoint
         *  without drain does not call. */
        @Override
        protected void finishProcessing(Txn txn) {
            txn.ended = true;
        }

        @Override
        protected void abort(Txn txn) {
            // nothing left the operator: the transaction's rows lived in memory and in checkpoint state only
        }
    }

    /** The negative control, a sink without transactions: every row appended to sink/direct.log (and flushed to
     *  the OS) as it reaches the sink, then "R" printed; on a checkpoint's completion "C id k", k being the
     *  source's offset in that checkpoint. What the file holds after a restore: the rows written before the
     *  kill, and again those of the events replayed from the restored checkpoint. */
    static final class DirectSink extends RichSinkFunction<String> implements CheckpointedFunction, CheckpointListener {
        private final String dir;
        private transient ListState<Long> kState;
        private transient long k;
        private transient TreeMap<Long, Long> kAt;
        private transient FileOutputStream file;

        DirectSink(String dir) {
            this.dir = dir;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            kState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("k", Types.LONG));
            k = 0;
            for (Long v : kState.get()) {
                k = Math.max(k, v);
            }
            kAt = new TreeMap<>();
            Files.createDirectories(Paths.get(dir));
            file = new FileOutputStream(Paths.get(dir, "direct.log").toFile(), true);
        }

        @Override
        public void invoke(String value, Context ctx) throws IOException {
            if (value.startsWith("K ")) {
                k = Math.max(k, Long.parseLong(value.substring(2)));
            } else {
                file.write((value + "\n").getBytes(StandardCharsets.UTF_8));
                say("R");
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            kAt.put(ctx.getCheckpointId(), k);
            kState.update(Collections.singletonList(k));
        }

        @Override
        public void notifyCheckpointComplete(long id) {
            Long kk = kAt.get(id);
            kAt.headMap(id, true).clear();
            if (kk != null) {
                say("C " + id + " " + kk);
            }
        }

        @Override
        public void close() throws Exception {
            if (file != null) {
                file.close();
            }
            super.close();
        }
    }

    /** Create path with data atomically (temp file, fsync, rename, fsync of the directory) unless it exists. */
    static void writeOnce(Path path, String data) throws IOException {
        if (Files.exists(path)) {
            return;
        }
        Path tmp = path.resolveSibling("." + path.getFileName() + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                                               StandardOpenOption.TRUNCATE_EXISTING)) {
            ch.write(java.nio.ByteBuffer.wrap(data.getBytes(StandardCharsets.UTF_8)));
            ch.force(true);
        }
        Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE);
        try (FileChannel d = FileChannel.open(path.getParent(), StandardOpenOption.READ)) {
            d.force(true);
        }
    }
}
