import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

/** A Kafka Streams app as a streams-group member (KIP-1071, group.protocol=streams on 4.2+):
 *  copies --topics to <group>-out. "assigned" is printed when the app reaches RUNNING. */
public final class BedStreams {
    public static void main(String[] argv) throws Exception {
        BedCommon c = new BedCommon(argv);
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, c.args.get("group"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, c.args.get("bootstrap"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, c.args.get("client-id"));
        // One stream thread: its consumer, <client-id>-StreamThread-1-consumer, is the group's
        // member (expect.py, broker_client_id).
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, c.get("state-dir", "/tmp/kafkabed-streams"));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArray().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArray().getClass());
        p.put("group.protocol", c.get("protocol", "streams"));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, c.get("replication-factor", "1"));
        StreamsBuilder b = new StreamsBuilder();
        b.stream(c.args.get("topics")).to(c.args.get("group") + "-out");
        KafkaStreams app = new KafkaStreams(b.build(), p);
        app.setStateListener((now, before) -> {
            c.emit("state", "\"state\":" + BedCommon.quote(now.toString()));
            if (now == KafkaStreams.State.RUNNING) c.emit("assigned", "\"partitions\":[]");
        });
        c.emit("started", "\"library\":\"java-streams\"");
        app.start();
        while (!c.close && app.state() != KafkaStreams.State.ERROR && app.state() != KafkaStreams.State.NOT_RUNNING) {
            Thread.sleep(50);
        }
        app.close(java.time.Duration.ofSeconds(20));
        c.emit("closed", null);
    }
}
