// One oij case through Flink DataStream's intervalJoin, for `oij adapter flink-ds` (oij/flink/datastream.py).
//
// Compiled with javac against PyFlink's own jars (pyflink/lib) the first time it is needed; run with java.
// Usage: OijDataStreamCase CASE_FILE PACE_MS      one case, then exit (a failed job: a stack trace, exit 1)
//        OijDataStreamCase --session PACE_MS      many cases in this JVM, read from stdin (below)
// A case (CASE_FILE, or a block of stdin lines), written by oij/flink/datastream.py, whitespace-separated longs:
//   line 1: lower upper lowerExclusive upperExclusive lateness(-1: watermark lines) channels
//   then in arrival order: "0 side id ts key" (a tuple; side 0 base, 1 probe; key an int the adapter assigned)
//                      or  "1 channel ts"     (a watermark line)
// Output on stdout: "P baseId probeId" per joined pair, "L id" per element of a late side output.
//
// Session mode: stdin holds cases one after another, each followed by the line "#END". The JVM starts one
// MiniCluster (SessionCluster) for the whole session; after a case's "#END" it runs that case as a job of its
// own on it (a fresh environment, operators, state and timers: nothing carries over), writes its output lines,
// then "#END", and flushes; a job that fails writes "#ERROR message" (its stack trace on stderr) before its
// "#END" and the session goes on. At EOF on stdin it stops the MiniCluster and exits 0; the parent
// (oij/flink/datastream.py's Session) starts it and ends it by closing stdin, or kills it. Anything else that
// prints to System.out during a session (a logger's console) is sent to stderr, out of the protocol.
//
// Data flow: one bounded source (parallelism 1) emits the events in arrival order, each PACE_MS after the
// previous one (a chained map sleeps), so that each reaches the join before the next is emitted. It is split
// into the two inputs by filters; each input assigns event time = ts and its own watermarks: in lateness
// mode Flink's BoundedOutOfOrderness generator (max ts - lateness - 1), asked after every element instead of
// every 200 ms of wall clock; in watermark mode the case's watermark lines, as marker records of that input
// (channel c goes to input c mod 2; one channel goes to both; an input with several channels emits the
// minimum of their maxima, as a source does over its splits), dropped after the watermark is taken. Then
// base.keyBy(key).intervalJoin(probe.keyBy(key)).between(lower, upper) [+ lowerBoundExclusive(),
// upperBoundExclusive()], with both late side outputs. The end of the bounded source is Flink's final
// watermark: every timer fires and the job ends by itself.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.eventtime.BoundedOutOfOrdernessWatermarks;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.client.ClientUtils;
import org.apache.flink.client.deployment.executors.PipelineExecutorUtils;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.PipelineExecutor;
import org.apache.flink.core.execution.PipelineExecutorFactory;
import org.apache.flink.core.execution.PipelineExecutorServiceLoader;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.minicluster.MiniClusterJobClient;
import org.apache.flink.runtime.minicluster.RpcServiceSharing;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

public class OijDataStreamCase {
    @SuppressWarnings("unchecked")
    static final TypeInformation<long[]> LONGS = (TypeInformation<long[]>) (TypeInformation<?>) Types.PRIMITIVE_ARRAY(Types.LONG);

    static final String END = "#END";

    public static void main(String[] args) throws Exception {
        if (args[0].equals("--session")) {
            session(Long.parseLong(args[1]));
            return;
        }
        String out = run(StreamExecutionEnvironment.getExecutionEnvironment(), Files.readAllLines(Paths.get(args[0])),
                         Long.parseLong(args[1]));
        System.out.print(out);
        System.out.flush();
    }

    /** Cases from stdin, each ended by "#END"; each case's output, then "#END"; until EOF. */
    static void session(long pace) throws Exception {
        try (SessionCluster cluster = new SessionCluster()) {
            session(cluster, pace);
        }
    }

    static void session(SessionCluster cluster, long pace) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = System.out;
        System.setOut(System.err);  // whatever else prints (a logger's console) goes to stderr, not into the protocol
        List<String> lines = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.equals(END)) {
                lines.add(line);
                continue;
            }
            String result;
            try {
                result = run(cluster.environment(), lines, pace);
            } catch (Exception e) {
                e.printStackTrace();
                result = "#ERROR " + String.valueOf(e).replace('\n', ' ') + "\n";
            }
            lines = new ArrayList<>();
            out.print(result + END + "\n");
            out.flush();
        }
    }

    /** The output lines of one case (its lines: the head line, then the events), each ending with a newline.
     *  An event: {kind (0 tuple, 1 marker), side or input, id, ts, key, channel}. */
    static String run(StreamExecutionEnvironment env, List<String> lines, long pace) throws Exception {
        long[] head = parse(lines.get(0));
        long lower = head[0], upper = head[1], lateness = head[4];
        boolean lowerExcl = head[2] != 0, upperExcl = head[3] != 0;
        int channels = (int) head[5];
        List<long[]> events = new ArrayList<>();
        for (String line : lines.subList(1, lines.size())) {
            long[] f = parse(line);
            if (f.length == 0) {
                continue;
            }
            if (f[0] == 0) {
                events.add(new long[] {0, f[1], f[2], f[3], f[4], 0});
            } else {
                int c = (int) f[1];
                for (int input = 0; input < 2; input++) {
                    if (channels == 1 || c % 2 == input) {
                        events.add(new long[] {1, input, 0, f[2], 0, c});
                    }
                }
            }
        }
        if (events.isEmpty()) {
            return "";  // fromData cannot make an empty source; no element, no pair, nothing late
        }
        env.setParallelism(1);
        env.setBufferTimeout(0);
        DataStream<long[]> all = env.fromData(LONGS, events.toArray(new long[0][])).map(e -> {
            Thread.sleep(pace);
            return e;
        }).returns(LONGS);
        KeyedStream<long[], Long> base = input(all, 0, lateness, channels).keyBy(e -> e[4], Types.LONG);
        KeyedStream<long[], Long> probe = input(all, 1, lateness, channels).keyBy(e -> e[4], Types.LONG);
        OutputTag<long[]> lateBase = new OutputTag<>("late-base", LONGS);
        OutputTag<long[]> lateProbe = new OutputTag<>("late-probe", LONGS);
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
        });
        DataStream<String> late = pairs.getSideOutput(lateBase).union(pairs.getSideOutput(lateProbe))
            .map(e -> "L " + e[2]).returns(Types.STRING);
        try (CloseableIterator<String> it = pairs.union(late).executeAndCollect("oij-flink-ds")) {
            StringBuilder sb = new StringBuilder();
            while (it.hasNext()) {
                sb.append(it.next()).append('\n');
            }
            return sb.toString();
        }
    }

    /** One MiniCluster for the whole session (what getExecutionEnvironment would start per job: one task manager,
     *  one slot, as the job's parallelism is 1), and environments whose jobs run on it: each case is its own job,
     *  with its own operators and state, so nothing carries from one case to the next. */
    static final class SessionCluster
            implements PipelineExecutorServiceLoader, PipelineExecutorFactory, PipelineExecutor, AutoCloseable {
        static final String NAME = "oij-session";
        private final MiniCluster cluster;

        SessionCluster() throws Exception {
            Configuration conf = new Configuration();
            conf.set(RestOptions.BIND_PORT, "0");
            cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(1).setRpcServiceSharing(RpcServiceSharing.SHARED)
                .build());
            cluster.start();
        }

        StreamExecutionEnvironment environment() {
            Configuration conf = new Configuration();
            conf.set(DeploymentOptions.TARGET, NAME);
            return new StreamExecutionEnvironment(this, conf, OijDataStreamCase.class.getClassLoader());
        }

        @Override
        public PipelineExecutorFactory getExecutorFactory(Configuration conf) {
            return this;
        }

        @Override
        public Stream<String> getExecutorNames() {
            return Stream.of(NAME);
        }

        @Override
        public String getName() {
            return NAME;
        }

        @Override
        public boolean isCompatibleWith(Configuration conf) {
            return true;
        }

        @Override
        public PipelineExecutor getExecutor(Configuration conf) {
            return this;
        }

        /** As Flink's LocalExecutor, but on the session's cluster, which the job's end leaves running. */
        @Override
        public CompletableFuture<JobClient> execute(Pipeline pipeline, Configuration conf, ClassLoader loader)
                throws Exception {
            StreamGraph graph = PipelineExecutorUtils.getStreamGraph(pipeline, conf);
            graph.serializeUserDefinedInstances();
            JobID id = cluster.submitJob(graph).get().getJobID();
            ClientUtils.waitUntilJobInitializationFinished(() -> cluster.getJobStatus(id).get(),
                () -> cluster.requestJobResult(id).get(), loader);
            return CompletableFuture.completedFuture(
                new MiniClusterJobClient(id, cluster, loader, MiniClusterJobClient.JobFinalizationBehavior.NOTHING));
        }

        @Override
        public void close() throws Exception {
            cluster.close();
        }
    }

    static DataStream<long[]> input(DataStream<long[]> all, int side, long lateness, int channels) {
        WatermarkStrategy<long[]> strategy = WatermarkStrategy.<long[]>forGenerator(
                ctx -> lateness >= 0 ? new PerElementBounded(lateness) : new Markers(side, channels))
            .withTimestampAssigner((e, t) -> e[3]);
        return all.filter(e -> e[1] == side).returns(LONGS)
            .assignTimestampsAndWatermarks(strategy)
            .filter(e -> e[0] == 0).returns(LONGS);
    }

    /** Flink's own bounded-out-of-orderness watermark (max ts - lateness - 1), emitted after every element. */
    static final class PerElementBounded implements WatermarkGenerator<long[]> {
        private final BoundedOutOfOrdernessWatermarks<long[]> inner;

        PerElementBounded(long lateness) {
            inner = new BoundedOutOfOrdernessWatermarks<>(Duration.ofMillis(lateness));
        }

        @Override
        public void onEvent(long[] e, long ts, WatermarkOutput out) {
            inner.onEvent(e, ts, out);
            inner.onPeriodicEmit(out);
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {
        }
    }

    /** The case's watermark lines of this input's channels: the minimum of their maxima, once all have spoken. */
    static final class Markers implements WatermarkGenerator<long[]> {
        private final long[] max;
        private final boolean[] mine;

        Markers(int side, int channels) {
            max = new long[channels];
            mine = new boolean[channels];
            Arrays.fill(max, Long.MIN_VALUE);
            for (int c = 0; c < channels; c++) {
                mine[c] = channels == 1 || c % 2 == side;
            }
        }

        @Override
        public void onEvent(long[] e, long ts, WatermarkOutput out) {
            if (e[0] != 1) {
                return;
            }
            int c = (int) e[5];
            max[c] = Math.max(max[c], e[3]);
            long w = Long.MAX_VALUE;
            for (int i = 0; i < max.length; i++) {
                if (mine[i]) {
                    w = Math.min(w, max[i]);
                }
            }
            if (w != Long.MIN_VALUE) {
                out.emitWatermark(new Watermark(w));
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {
        }
    }

    static long[] parse(String line) {
        String[] parts = line.trim().split("\\s+");
        if (parts.length == 1 && parts[0].isEmpty()) {
            return new long[0];
        }
        long[] f = new long[parts.length];
        for (int i = 0; i < parts.length; i++) {
            f[i] = Long.parseLong(parts[i]);
        }
        return f;
    }
}
