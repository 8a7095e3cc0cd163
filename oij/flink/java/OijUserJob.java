// An ordinary Flink DataStream interval join over two input files, written as its users write it, for
// oij/flink/userjob.py (issue 63: judge an engine's output up to its own watermark schedule).
//
// Compiled with javac against PyFlink's own jars (pyflink/lib) with the other programs of this folder
// (oij/flink/peers.py's flink_jar); run with java, one job per JVM (a local MiniCluster, started by
// getExecutionEnvironment and stopped when the job ends).
// Usage: OijUserJob BASE_FILE PROBE_FILE OUT_FILE PARALLELISM LOWER UPPER LOWER_EXCL UPPER_EXCL LATENESS LATE_SIDE
//   BASE_FILE, PROBE_FILE: one tuple a line, "id ts key" (longs), in the input's arrival order;
//   LOWER_EXCL, UPPER_EXCL, LATE_SIDE: 0 or 1.
// Output (OUT_FILE, plain text, written by this program and read back by the Python side):
//   "P baseId probeId key subtask" per joined pair (subtask: the join instance that emitted it),
//   "L id" per element of a late side output (LATE_SIDE 1 only),
//   "K key instance" per distinct key seen, the instance KeyGroupRangeAssignment gives it at this parallelism.
//
// Data flow:
//   FileSource(BASE_FILE)  (one split: the file read line by line, as fast as Flink reads it, parallelism 1)
//     -> parse -> assignTimestampsAndWatermarks(forBoundedOutOfOrderness(LATENESS ms), ts)   (parallelism 1)
//     -> keyBy(key: Long)
//   FileSource(PROBE_FILE) likewise
//   base.intervalJoin(probe).between(LOWER, UPPER) [lowerBoundExclusive(), upperBoundExclusive()]
//     [sideOutputLeftLateData, sideOutputRightLateData] .process(...)    (PARALLELISM instances)
//     -> executeAndCollect -> OUT_FILE
// Everything else is Flink's default: the periodic watermark every 200 ms of wall clock
// (pipeline.auto-watermark-interval), which emits max ts - LATENESS - 1; the join's watermark the minimum over
// its two inputs; the buffer timeout (100 ms); the max parallelism (128 key groups for parallelism <= 128).
// The end of each bounded input is Flink's final watermark: every timer fires and the job ends by itself.

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.time.Duration;
import java.util.TreeSet;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

public class OijUserJob {
    @SuppressWarnings("unchecked")
    static final TypeInformation<long[]> LONGS = (TypeInformation<long[]>) (TypeInformation<?>) Types.PRIMITIVE_ARRAY(Types.LONG);

    public static void main(String[] args) throws Exception {
        String baseFile = args[0], probeFile = args[1], outFile = args[2];
        int par = Integer.parseInt(args[3]);
        long lower = Long.parseLong(args[4]), upper = Long.parseLong(args[5]);
        boolean lowerExcl = args[6].equals("1"), upperExcl = args[7].equals("1");
        long lateness = Long.parseLong(args[8]);
        boolean lateSide = args[9].equals("1");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(par);
        KeyedStream<long[], Long> base = input(env, baseFile, "base", lateness).keyBy(e -> e[2], Types.LONG);
        KeyedStream<long[], Long> probe = input(env, probeFile, "probe", lateness).keyBy(e -> e[2], Types.LONG);
        OutputTag<long[]> lateBase = new OutputTag<>("late-base", LONGS);
        OutputTag<long[]> lateProbe = new OutputTag<>("late-probe", LONGS);
        KeyedStream.IntervalJoined<long[], long[], Long> joined = base.intervalJoin(probe)
            .between(Duration.ofMillis(lower), Duration.ofMillis(upper));
        if (lowerExcl) {
            joined = joined.lowerBoundExclusive();
        }
        if (upperExcl) {
            joined = joined.upperBoundExclusive();
        }
        if (lateSide) {
            joined = joined.sideOutputLeftLateData(lateBase).sideOutputRightLateData(lateProbe);
        }
        SingleOutputStreamOperator<String> pairs = joined.process(new ProcessJoinFunction<long[], long[], String>() {
            @Override
            public void processElement(long[] a, long[] b, Context ctx, Collector<String> out) {
                int sub = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
                out.collect("P " + a[0] + " " + b[0] + " " + a[2] + " " + sub);
            }
        }).name("interval-join");
        DataStream<String> all = pairs;
        if (lateSide) {
            all = pairs.union(pairs.getSideOutput(lateBase).union(pairs.getSideOutput(lateProbe))
                .map(e -> "L " + e[0]).returns(Types.STRING));
        }
        int maxPar = KeyGroupRangeAssignment.computeDefaultMaxParallelism(par);
        TreeSet<Long> keys = new TreeSet<>();
        keys.addAll(KeysOf.read(baseFile));
        keys.addAll(KeysOf.read(probeFile));
        try (CloseableIterator<String> it = all.executeAndCollect("oij-user-job");
             BufferedWriter w = new BufferedWriter(new FileWriter(outFile), 1 << 20)) {
            while (it.hasNext()) {
                w.write(it.next());
                w.write('\n');
            }
            for (Long k : keys) {
                w.write("K " + k + " " + KeyGroupRangeAssignment.assignKeyToParallelOperator(k, maxPar, par) + "\n");
            }
        }
    }

    /** One input: its file read line by line by Flink's FileSource, parsed, event time = ts, and Flink's bounded
     *  out-of-orderness watermarks, emitted periodically (every 200 ms by default). */
    static DataStream<long[]> input(StreamExecutionEnvironment env, String file, String name, long lateness) {
        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(file)).build();
        return env.fromSource(src, WatermarkStrategy.noWatermarks(), name).setParallelism(1)
            .map(OijUserJob::parse).returns(LONGS).setParallelism(1).name("parse-" + name)
            .assignTimestampsAndWatermarks(WatermarkStrategy.<long[]>forBoundedOutOfOrderness(Duration.ofMillis(lateness))
                .withTimestampAssigner((e, t) -> e[1])).setParallelism(1).name("watermarks-" + name);
    }

    /** "id ts key" -> {id, ts, key}. */
    static long[] parse(String line) {
        long[] e = new long[3];
        int from = 0;
        for (int i = 0; i < 3; i++) {
            int to = line.indexOf(' ', from);
            if (to < 0) {
                to = line.length();
            }
            e[i] = Long.parseLong(line.substring(from, to));
            from = to + 1;
        }
        return e;
    }

    /** The distinct keys of an input file (read once more, outside the job, for the key-to-instance lines). */
    static final class KeysOf {
        static TreeSet<Long> read(String file) throws java.io.IOException {
            TreeSet<Long> keys = new TreeSet<>();
            try (java.io.BufferedReader r = java.nio.file.Files.newBufferedReader(java.nio.file.Paths.get(file))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (!line.isEmpty()) {
                        keys.add(parse(line)[2]);
                    }
                }
            }
            return keys;
        }
    }
}
