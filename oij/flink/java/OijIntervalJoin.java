// Flink DataStream intervalJoin over an oij peers CSV (side,id,ts,key per line, arrival order), for `oij bench peers`.
//
// PyFlink exposes the DataStream interval join only in Java; `oij bench peers` compiles this file with javac
// against PyFlink's own jars (pyflink/lib) when a JDK is present and runs it with java.
// Usage: OijIntervalJoin IN.csv OUT.csv PARALLELISM LOWER UPPER LATENESS   (times in ms = oij's time units)
// Reads the file with Flink's FileSource (one split, in order), assigns event time = ts with a bounded
// out-of-orderness watermark of LATENESS, keys both sides by key and joins with between(LOWER, UPPER)
// (inclusive bounds, Flink's default), writing "base,probe" lines through executeAndCollect.

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

public class OijIntervalJoin {
    @SuppressWarnings("unchecked")
    static final TypeInformation<long[]> LONGS = (TypeInformation<long[]>) (TypeInformation<?>) Types.PRIMITIVE_ARRAY(Types.LONG);

    public static void main(String[] args) throws Exception {
        String in = args[0];
        String out = args[1];
        int par = Integer.parseInt(args[2]);
        long lower = Long.parseLong(args[3]);
        long upper = Long.parseLong(args[4]);
        long lateness = Long.parseLong(args[5]);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(par);
        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(in)).build();
        DataStream<long[]> events = env.fromSource(src, WatermarkStrategy.noWatermarks(), "csv").setParallelism(1)
            .map(OijIntervalJoin::parse).returns(LONGS).setParallelism(1)
            .assignTimestampsAndWatermarks(WatermarkStrategy.<long[]>forBoundedOutOfOrderness(Duration.ofMillis(lateness))
                .withTimestampAssigner((e, t) -> e[2])).setParallelism(1);
        DataStream<long[]> base = events.filter(e -> e[0] == 0).setParallelism(1);
        DataStream<long[]> probe = events.filter(e -> e[0] == 1).setParallelism(1);
        DataStream<String> pairs = base.keyBy(e -> e[3], Types.LONG)
            .intervalJoin(probe.keyBy(e -> e[3], Types.LONG))
            .between(Duration.ofMillis(lower), Duration.ofMillis(upper))
            .process(new ProcessJoinFunction<long[], long[], String>() {
                @Override
                public void processElement(long[] a, long[] b, Context ctx, Collector<String> o) {
                    o.collect(a[1] + "," + b[1]);
                }
            });
        try (CloseableIterator<String> it = pairs.executeAndCollect("oij-peers");
             BufferedWriter w = new BufferedWriter(new FileWriter(out), 1 << 20)) {
            while (it.hasNext()) {
                w.write(it.next());
                w.write('\n');
            }
        }
    }

    static long[] parse(String line) {
        long[] e = new long[4];
        int from = 0;
        for (int i = 0; i < 4; i++) {
            int to = line.indexOf(',', from);
            if (to < 0) {
                to = line.length();
            }
            e[i] = Long.parseLong(line.substring(from, to));
            from = to + 1;
        }
        return e;
    }
}
